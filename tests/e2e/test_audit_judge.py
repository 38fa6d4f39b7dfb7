"""`judge=<name>` in an audit: the judge runs after the models, against a local fake provider, and its
semantic flip lands in summary.csv; a missing judge key fails before any model call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]


def always_equivalent_judge(call) -> str:
    """A stand-in judge model: the set (reference protocol) or every answer after the first is 'A'."""
    if "Decide ONE label" in call.texts()[-1]:
        return "Verdict: A\nReason: all the same"
    n = len(re.findall(r"Answer \d+(?: \(reference\))?:\n", call.texts()[-1]))
    return json.dumps({"verdicts": [{"answer": i, "verdict": "A", "reason": "same"} for i in range(2, n + 1)]})


def audit(run_dir: Path, *overrides: str, env: dict | None = None) -> Ran:
    """`python -m facet_probe` into `run_dir`, in this process; `env` adds to the environment (API keys: none else)."""
    return run_module("facet_probe", f"hydra.run.dir={run_dir}", "progress=false", *overrides, env=env, cwd=ROOT)


@pytest.mark.slow
def test_judged_run_reports_semantic_flip_for_free_form_cells(tmp_path):
    env = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}
    with FakeProviderServer(reply=always_equivalent_judge) as server:
        proc = audit(tmp_path / "run", "model=oracle", "facet=mixed_modality_order", "dataset=synthetic_mixed",
                     "limit=3", "judge=gpt_54_mini", f"judge.runner.base_url={server.url}/v1", env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(server.calls) == 3  # one judge call per case, carrying all K answers
        assert all("Decide ONE label" in c.texts()[-1] for c in server.calls)  # the default: reference protocol
    summary = pd.read_csv(tmp_path / "run" / "summary.csv")
    (col,) = [c for c in summary.columns if c.startswith("sem_flip_")]
    assert col == "sem_flip_set_gpt_54_mini" and summary[col].tolist() == [0.0]
    assert "sk-test-not-a-real-key" not in (tmp_path / "run" / "judgments.jsonl").read_text()


def test_missing_judge_key_fails_before_any_model_call(tmp_path):
    proc = audit(tmp_path / "run", "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=2",
                 "judge=gpt_54_mini")  # run_module drops the API keys
    assert proc.returncode == 2
    assert "OPENAI_API_KEY" in proc.stderr
    assert not (tmp_path / "run" / "trials.jsonl").exists()
