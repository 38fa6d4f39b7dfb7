"""`python -m facet_probe.report` recomputes tables from stored trials, including reference files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]


def reference_trial(item: str, k: int, answer: str, gold: str = "A") -> dict:
    """A FACET-PROBE v0.0.1 trial line: no trial_key, no repeat_idx, no parse_status."""
    return {"facet": "option_order", "dataset": "mmlu_pro", "model": "ref-model", "item_id": item,
            "ordering_idx": k, "permutation": [0, 1, 2, 3], "answer_normalized": answer,
            "gold_normalized": gold, "correct": answer == gold, "score_kind": "inverse_permutation",
            "prompt_hash": f"h{item}{k}", "raw_output": f"Answer: {answer}"}


def test_reference_trial_files_are_re_reported(tmp_path):
    lines = [reference_trial("mmlu_pro::1", k, "A") for k in range(6)]
    lines += [reference_trial("mmlu_pro::2", k, "A" if k < 3 else "B") for k in range(6)]
    src = tmp_path / "reference_trials.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "report"
    proc = run_module("facet_probe.report", f"input={src}", f"out={out}", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    (row,) = pd.read_csv(out / "summary.csv").to_dict("records")
    assert row["n_items"] == 2
    assert row["flip_rate"] == 0.5  # item 2 flips, item 1 does not
    assert row["accuracy"] == (6 + 3) / 12
    assert (out / "report.md").read_text().startswith("# facet_probe report")


def test_missing_input_is_a_clear_error(tmp_path):
    proc = run_module("facet_probe.report", f"input={tmp_path / 'nope'}", cwd=ROOT)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr
