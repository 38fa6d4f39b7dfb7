"""`python -m facet_probe.judge` killed with SIGKILL mid-run, again and again, then run to the end: no judgment
lost, none stored twice, nothing half-written (the judge calls go to the loopback fake provider)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.store.jsonl import iter_records
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_argv
from facet_probe_dev.testing.kill import kill_when

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}
ENV = {**os.environ, **KEYS, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
ITEMS = 10


def equivalent(call) -> str:
    if "Decide ONE label" in call.texts()[-1]:  # the default, reference protocol
        return "Verdict: A\nReason: same"
    n = len(re.findall(r"Answer \d+(?: \(reference\))?:\n", call.texts()[-1]))
    return json.dumps({"verdicts": [{"answer": i, "verdict": "A", "reason": "same"} for i in range(2, n + 1)]})


def judge_cmd(run: Path, url: str) -> list[str]:
    return [sys.executable, "-m", "facet_probe.judge", f"input={run}", "judge=gpt_54_mini",
            f"judge.runner.base_url={url}/v1", "judge.runner.concurrency.initial=1",
            "judge.runner.concurrency.max_in_flight=1"]


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.slow
def test_a_judge_run_killed_again_and_again_resumes_with_every_judgment_once(tmp_path):
    run = tmp_path / "run"
    audit = [sys.executable, "-m", "facet_probe", f"hydra.run.dir={run}", "progress=false", "model=oracle",
             "facet=mixed_modality_order", "dataset=synthetic_mixed", f"limit={ITEMS}"]
    made = run_argv(audit, env=KEYS, cwd=ROOT)  # only the judge's kills need a process of their own
    assert made.returncode == 0, made.stderr[-3000:]
    fresh = shutil.copytree(run, tmp_path / "fresh")
    judgments = run / "judgments.jsonl"
    kills = 0
    with FakeProviderServer(reply=equivalent, latency_s=0.25) as server:
        uninterrupted = run_argv(judge_cmd(fresh, server.url), env=KEYS, cwd=ROOT)
        assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
        expected = {r["judgment_key"]: r["set_verdict"] for r in iter_records(fresh / "judgments.jsonl")}
        cases = len(expected)
        assert cases >= 8
        for target in (2, 5, 8):  # kill once this many judgments are stored
            at_kill = kill_when(judge_cmd(run, server.url), lambda: lines(judgments), target, cwd=ROOT, env=ENV,
                                timeout_s=120)
            kills += 1
            assert target <= at_kill < cases
            if kills == 2:  # as a kill in the middle of an append leaves it
                with judgments.open("ab") as fh:
                    fh.write(b'{"judgment_key": "0f3a')
        final = run_argv(judge_cmd(run, server.url), env=KEYS, cwd=ROOT)
    assert final.returncode == 0, final.stderr[-3000:]
    assert kills == 3
    records = list(iter_records(judgments))
    keys = [r["judgment_key"] for r in records]
    assert len(keys) == len(set(keys)) == cases  # one judgment per case: none lost, none twice
    assert {r["judgment_key"]: r["set_verdict"] for r in records} == expected  # the same as an uninterrupted run
    assert judgments.read_bytes().endswith(b"\n")
    flips = pd.read_csv(run / "semantic_flip.csv")
    assert len(flips) == cases and (flips["sem_flip_set"] == 0).all()
    assert len(pd.read_csv(run / "judgments.csv")) == cases * 6
