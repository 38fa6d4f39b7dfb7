"""A batch audit killed half way (SIGKILL, as a pre-empted job) and resumed by the same command: no trial
lost, no call repeated (each request went into exactly one batch), and no interactive call made."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from api_test_helpers import KEYS

from facet_probe.store.jsonl import iter_records
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_argv
from facet_probe_dev.testing.kill import kill_when

ROOT = Path(__file__).resolve().parents[3]


def stored(run: Path) -> list[dict]:
    path = run / "trials.jsonl"
    return list(iter_records(path)) if path.exists() else []


@pytest.mark.slow
def test_a_killed_batch_run_resumes_with_nothing_lost_and_nothing_paid_twice(tmp_path):
    run = tmp_path / "run"
    env = {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, **KEYS, "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    with FakeProviderServer(batch_polls=3) as server:  # 6 batches of 3, ending one after another
        cmd = [sys.executable, "-m", "facet_probe", f"hydra.run.dir={run}", "progress=false", "model=gpt_54_mini",
               f"model.base_url={server.url}/v1", "facet=option_order", "dataset=synthetic_mcq", "limit=3",
               "batch.enabled=true", "batch.max_requests=3", "batch.poll_s=0.1"]
        at_kill = kill_when(cmd, lambda: len(stored(run)), 6, cwd=ROOT, env=env)
        before = {t["trial_key"]: t for t in stored(run)}
        record = [json.loads(line) for line in next(run.glob("batches/*.jsonl")).read_text().splitlines()]
        resumed = run_argv(cmd, env=KEYS, cwd=ROOT)  # the resume in this process: only the kill needs its own
        after = {t["trial_key"]: t for t in stored(run)}
        submitted = server.batches.submitted_keys()
        interactive = [c for c in server.calls if not c.path.startswith("batch:")]
    events = [r["event"] for r in record]
    print(f"killed at {at_kill} of 18 trials, {events.count('submitted')} batches submitted, "
          f"{events.count('collected')} collected; after resume {len(after)} trials, "
          f"{len(submitted)} requests submitted ({len(submitted) - len(set(submitted))} repeated), "
          f"{len(interactive)} interactive calls")
    assert 6 <= at_kill < 18, "the kill landed half way"
    assert sum(r["event"] == "submitted" for r in record) == 6  # every batch id was on disk before the kill
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(after) == 18 and all(t["error"] is None for t in after.values())
    assert all(after[k] == t for k, t in before.items())  # trials lost: 0 (and none rewritten)
    assert len(submitted) == len(set(submitted)) == 18  # calls repeated: 0
    assert not interactive
    assert {t["provenance"]["batch_id"] for t in after.values()} == set(server.batches.jobs)
    cost = json.loads((run / "cost.json").read_text())
    assert cost["models"]["gpt_54_mini"]["estimate"]["batch"] is True
    spent = sum(t["provenance"]["cost_usd"] for t in after.values())
    full = sum(t["usage"]["input_tokens"] * 0.75 + t["usage"]["output_tokens"] * 4.5 for t in after.values()) / 1e6
    assert spent == pytest.approx(full / 2)  # batch results are billed at the batch price
