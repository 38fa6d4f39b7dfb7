"""A run killed mid-way (SIGKILL) resumes without repeating any call whose answer was stored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from api_test_helpers import fast, make_runner, text_prompt

from facet_probe.runners.base import Request, generate_all
from facet_probe_dev.testing.fake_providers import FakeProviderServer

CHILD = """
import json, os, sys
from api_test_helpers import fast, make_runner, text_prompt
from facet_probe.runners.base import Request
url, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runner = make_runner("gpt_54_mini", url, **fast("gpt_54_mini", **{"concurrency.initial": 2,
                                                                  "concurrency.max_in_flight": 2}))
reqs = [Request(key=f"q{i}", prompt=text_prompt(f"q{i}")) for i in range(n)]
with open(out, "a") as fh:
    for req, resp in runner.generate(reqs):  # store each answer at once, as the app's trial store does
        fh.write(json.dumps({"key": req.key, "text": resp.text}) + "\\n")
        fh.flush()
        os.fsync(fh.fileno())
"""


def stored(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a torn last line from the kill
            continue
        out[rec["key"]] = rec["text"]
    return out


@pytest.mark.slow
def test_a_killed_run_resumes_without_paying_twice(api_keys, tmp_path):
    n = 30
    out = tmp_path / "answers.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.getcwd()])}
    with FakeProviderServer(latency_s=0.05) as server:
        # a real process: killing it with SIGKILL mid-run and resuming is what this checks
        child = subprocess.Popen([sys.executable, "-c", CHILD, server.url + "/v1", str(out), str(n)], env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(stored(out)) < 6):
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        done_before = stored(out)
        calls_before = len(server.calls)

        runner = make_runner("gpt_54_mini", server.url + "/v1", **fast("gpt_54_mini"))
        rest = [
            Request(key=f"q{i}", prompt=text_prompt(f"q{i}")) for i in range(n) if f"q{i}" not in done_before
        ]
        resumed = generate_all(runner, rest)
        asked_again = {c.texts()[-1] for c in server.calls[calls_before:]}

    assert 6 <= len(done_before) < n, "the child was killed mid-run"
    assert not {f"Question {k}?" for k in done_before} & asked_again  # no stored answer was bought twice
    assert set(done_before) | set(resumed) == {f"q{i}" for i in range(n)}
    assert all(r.error is None for r in resumed.values())
