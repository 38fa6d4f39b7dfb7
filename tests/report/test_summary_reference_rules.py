"""Under the reference's rules (`few_parsed=not_flipped`), a FACET-PROBE v0.0.1 trial file reports the
reference's `flip_rate` as `any_flip_parsed` and its `macro_accuracy` as `accuracy_parsed`, exactly."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]

# (item, ordering, answer_normalized or None for unparsed, correct or None)
ROWS = [
    ("q1", 0, "A", True), ("q1", 1, "A", True), ("q1", 2, "B", False),      # flipped
    ("q2", 0, "C", True), ("q2", 1, "C", True), ("q2", 2, "C", True),       # stable
    ("q3", 0, "D", False), ("q3", 1, None, None), ("q3", 2, None, None),    # one parsed answer
    ("q4", 0, None, None), ("q4", 1, None, None), ("q4", 2, None, None),    # none parsed
    ("q5", 0, "A", False), ("q5", 1, None, None), ("q5", 2, "B", True),     # flipped among parsed
]


def reference_cell(rows):
    """FACET-PROBE v0.0.1's `summarize_groups`: flipped = more than one distinct non-null answer;
    macro accuracy = mean over items of the mean of non-null `correct`."""
    by_item = defaultdict(list)
    for item, _, answer, correct in rows:
        by_item[item].append((answer, correct))
    flips = [len({a for a, _ in v if a is not None}) > 1 for v in by_item.values()]
    accs = [sum(bool(c) for _, c in v if c is not None) / len([c for _, c in v if c is not None])
            for v in by_item.values() if any(c is not None for _, c in v)]
    return sum(flips) / len(flips), sum(accs) / len(accs)


def write_reference_file(path: Path) -> None:
    with path.open("w") as fh:
        for item, o, answer, correct in ROWS:
            fh.write(json.dumps({"facet": "option_order", "dataset": "csqa", "model": "m", "item_id": item,
                                 "ordering_idx": o, "permutation": [0, 1, 2, 3], "answer_normalized": answer,
                                 "gold_normalized": "A", "correct": correct, "score_kind": "option_content_idx",
                                 "prompt_hash": f"h{item}{o}", "raw_output": ""}) + "\n")


def report(tmp: Path, *overrides: str) -> pd.Series:
    trials = tmp / "ref_trials.jsonl"
    write_reference_file(trials)
    out = tmp / "rep"
    proc = run_module("facet_probe.report", f"input={trials}", f"out={out}", "bootstrap=10", *overrides, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    (row,) = pd.read_csv(out / "summary.csv").to_dict("records")
    return pd.Series(row)


def test_reference_rules_give_the_reference_flip_rate_and_macro_accuracy_exactly(tmp_path):
    flip_rate, macro_accuracy = reference_cell(ROWS)
    row = report(tmp_path, "few_parsed=not_flipped")
    assert row["any_flip_parsed"] == flip_rate == 2 / 5
    assert row["accuracy_parsed"] == pytest.approx(macro_accuracy, abs=0, rel=1e-15)


def test_by_default_items_with_fewer_than_two_parsed_answers_are_left_out(tmp_path):
    row = report(tmp_path)
    assert row["any_flip_parsed"] == 2 / 3  # q3 and q4 have no pair to compare
    assert row["accuracy"] == pytest.approx((2 / 3 + 1 + 0 + 0 + 1 / 3) / 5)  # a parse error is wrong


@pytest.mark.slow
def test_an_unknown_rule_is_a_clear_error(tmp_path):
    trials = tmp_path / "t.jsonl"
    write_reference_file(trials)
    proc = run_module("facet_probe.report", f"input={trials}", f"out={tmp_path / 'o'}", "few_parsed=sometimes",
                   cwd=ROOT)
    assert proc.returncode == 2 and "choose one of exclude, not_flipped" in proc.stderr
