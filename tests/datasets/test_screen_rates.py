"""The raw-vs-screened table of the image-set cells, from the report's own cell summary."""

from __future__ import annotations

import pandas as pd

from facet_probe.datasets.screen_rates import COLUMNS, screened_rates
from facet_probe.report.summary import summarise


def trials_frame() -> pd.DataFrame:
    """Two image-set items (one the screen excludes, which flips) and one option-order item."""
    rows = []
    for item, facet, dataset, answers in [
        ("mantis_eval::a", "image_set_order", "mantis_eval", ["A", "A"]),
        ("mantis_eval::b", "image_set_order", "mantis_eval", ["A", "B"]),
        ("mmlu_pro::c", "option_order", "mmlu_pro", ["A", "A"]),
    ]:
        for idx, answer in enumerate(answers):
            rows.append({"model": "m", "facet": facet, "dataset": dataset, "item_id": item, "ordering_idx": idx,
                         "repeat_idx": 0, "correct": answer == "A", "answer_normalized": answer, "n_options": 3})
    return pd.DataFrame(rows)


def test_the_screened_table_shows_raw_and_screened_rates_side_by_side():
    items = {("mantis_eval", "mantis_eval::b"): {"metadata": {"position_screen": {"verdict": "exclude"}}},
             ("mantis_eval", "mantis_eval::a"): {"metadata": {"position_screen": {"verdict": "keep"}}}}
    _, summary = summarise(trials_frame(), items, n_boot=20, seed=0)
    table = screened_rates(summary)
    assert list(table.columns) == COLUMNS and len(table) == 1  # the option-order cell is not screened
    row = table.iloc[0]
    assert (row.dataset, row.n_raw, row.n_screened, row.screened_out) == ("mantis_eval", 2, 1, 1)
    assert row.flip_rate_raw == 0.5 and row.flip_rate_screened == 0.0
    assert row.accuracy_raw == 0.75 and row.accuracy_screened == 1.0


def test_an_untouched_image_set_cell_has_equal_raw_and_screened_numbers_and_no_cell_gives_an_empty_table():
    _, summary = summarise(trials_frame(), {}, n_boot=20, seed=0)
    row = screened_rates(summary).iloc[0]
    assert row.n_raw == row.n_screened == 2 and row.flip_rate_raw == row.flip_rate_screened == 0.5
    assert list(screened_rates(summary.iloc[0:0]).columns) == COLUMNS


def test_a_run_report_writes_the_screened_rates_table(tmp_path):
    from facet_probe.report.contents import MetricRules, ReportInputs
    from facet_probe.report.run import write_outputs

    rows = [{"trial_key": f"{item}-{k}", "model": "m", "facet": "image_set_order", "dataset": "mantis_eval",
             "item_id": item, "ordering_idx": k, "repeat_idx": 0, "permutation": [0, 1, 2],
             "answer_normalized": answer, "gold_normalized": "A", "correct": answer == "A", "parse_status": "ok",
             "n_options": 4, "score_kind": "letter", "raw_output": f"Answer: {answer}"}
            for item, answers in {"mantis_eval::keep": ["A"] * 6, "mantis_eval::pos": ["A", "B"] * 3}.items()
            for k, answer in enumerate(answers)]
    items = {("mantis_eval", "mantis_eval::keep"): {"metadata": {"position_screen": {"verdict": "keep"}}},
             ("mantis_eval", "mantis_eval::pos"): {"metadata": {"position_screen": {"verdict": "exclude"}}}}
    write_outputs(ReportInputs(pd.DataFrame(rows), items), tmp_path, MetricRules(n_boot=50))
    table = pd.read_csv(tmp_path / "screened_rates.csv")
    assert table[["n_raw", "n_screened", "flip_rate_raw", "flip_rate_screened"]].values.tolist() == [[2, 1, 0.5, 0.0]]


def test_the_raw_and_unscreened_intervals_are_named_as_every_interval_is():
    """Issue 60.8: `flip_rate_lo_raw` was no interval to the table rule; its bound suffix now comes last."""
    from facet_probe.store.table_rules import Interval, intervals, violations

    items = {("mantis_eval", "mantis_eval::b"): {"metadata": {"position_screen": {"verdict": "exclude"}}}}
    _, summary = summarise(trials_frame(), items, n_boot=20, seed=0)
    table = screened_rates(summary)
    assert Interval("flip_rate_unscreened_lo", "flip_rate_unscreened_hi", "flip_rate_unscreened") in intervals(
        list(summary.columns))
    assert {Interval(f"flip_rate_{kind}_lo", f"flip_rate_{kind}_hi", f"flip_rate_{kind}") for kind in
            ("raw", "screened")} <= set(intervals(list(table.columns)))
    assert violations(summary) == [] and violations(table) == []
