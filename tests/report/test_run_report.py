"""Run reports: image-set cells are screened by default, with the unscreened numbers beside them."""

from __future__ import annotations

import pandas as pd

from facet_probe.report import run as report_run
from facet_probe.report import trials_parquet
from facet_probe.report.contents import MetricRules, ReportInputs
from facet_probe.report.run import ReportOutputs, write_outputs


def image_set_trials(answers_by_item: dict[str, list[str]]) -> pd.DataFrame:
    rows = []
    for item_id, answers in answers_by_item.items():
        for k, answer in enumerate(answers):
            rows.append({"trial_key": f"{item_id}-{k}", "model": "m", "facet": "image_set_order",
                         "dataset": "mantis_eval", "item_id": item_id, "ordering_idx": k, "repeat_idx": 0,
                         "permutation": [0, 1, 2], "answer_normalized": answer, "gold_normalized": "A",
                         "correct": answer == "A", "parse_status": "ok", "n_options": 4,
                         "score_kind": "letter", "raw_output": f"Answer: {answer}"})
    return pd.DataFrame(rows)


def write(trials: pd.DataFrame, out, items: dict | None = None) -> ReportOutputs:
    """The report of `trials` in `out`, 50 bootstrap resamples an interval."""
    return write_outputs(ReportInputs(trials, items or {}), out, MetricRules(n_boot=50))


def screen(verdict: str) -> dict:
    return {"metadata": {"position_screen": {"verdict": verdict, "reasons": []}}}


def test_excluded_items_leave_the_headline_numbers_but_stay_beside_them(tmp_path):
    trials = image_set_trials({"mantis_eval::keep": ["A"] * 6, "mantis_eval::pos": ["A", "B"] * 3})
    items = {("mantis_eval", "mantis_eval::keep"): screen("keep"), ("mantis_eval", "mantis_eval::pos"): screen("exclude")}
    out = write(trials, tmp_path, items)
    (row,) = out.summary.to_dict("records")
    assert row["n_items"] == 1 and row["flip_rate"] == 0.0
    assert row["n_items_unscreened"] == 2 and row["flip_rate_unscreened"] == 0.5
    assert row["screened_out"] == 1
    assert "unscreened" in (tmp_path / "report.md").read_text()


def test_a_cell_the_screen_empties_is_still_reported_with_its_raw_numbers(tmp_path):
    trials = image_set_trials({"mantis_eval::pos": ["A", "B"] * 3})
    out = write(trials, tmp_path, {("mantis_eval", "mantis_eval::pos"): screen("exclude")})
    (row,) = out.summary.to_dict("records")
    assert row["n_items"] == 0 and pd.isna(row["flip_rate"])
    assert row["n_items_unscreened"] == 1 and row["flip_rate_unscreened"] == 1.0


def test_without_screen_verdicts_nothing_is_dropped(tmp_path):
    trials = image_set_trials({"mantis_eval::a": ["A"] * 6, "mantis_eval::b": ["A", "C"] * 3})
    out = write(trials, tmp_path)
    (row,) = out.summary.to_dict("records")
    assert row["n_items"] == 2 and row["flip_rate"] == 0.5 and row["screened_out"] == 0


def test_a_report_past_the_explorer_bound_leaves_no_stale_page_and_says_how_to_build_one(tmp_path, monkeypatch,
                                                                                        caplog):
    trials = image_set_trials({"mantis_eval::a": ["A"] * 6, "mantis_eval::b": ["A", "C"] * 3})
    trials = trials.assign(prompt_hash=[f"h{i}" for i in range(len(trials))], mode="direct", raw_output="Answer: A")
    with monkeypatch.context() as m:
        m.setattr("facet_probe.report.explorer.page.INLINE_BYTES", 0)  # an earlier page with chunk files beside it
        write(trials, tmp_path)
    assert (tmp_path / "explorer.html").is_file() and list((tmp_path / "explorer_data").glob("*.js"))
    monkeypatch.setattr(report_run, "EXPLORER_MAX_TRIALS", 10)  # the same report, as if it were paper-scale
    write(trials, tmp_path)
    assert not (tmp_path / "explorer.html").exists()
    assert not (tmp_path / "explorer_data").exists()
    assert "python -m facet_probe.explore" in caplog.text


def test_a_runs_name_is_its_last_three_folders_without_the_roots_slash(tmp_path):
    from pathlib import Path

    from facet_probe.report.provenance import run_name

    assert run_name(tmp_path / "m" / "scope" / "direct-k6") == "m/scope/direct-k6"
    assert run_name(Path("/tmp/x")) == "tmp/x"  # was "//tmp/x"


def test_json_cells_give_each_cell_its_own_text_whether_its_object_is_shared_or_not():
    from facet_probe.report.trials_parquet import json_cells

    shared = {"runner": "api", "cost_usd": 0.5}
    cells = pd.Series([shared, {"cost_usd": 0.5, "runner": "api"}, shared, {}, {"b": [1, 2]}], index=[3, 1, 4, 1, 5])
    texts = json_cells(cells).to_array()
    assert texts.to_pylist() == ['{"cost_usd": 0.5, "runner": "api"}'] * 3 + ["{}", '{"b": [1, 2]}']


def test_trial_costs_sum_each_models_tokens_and_cost_whether_records_are_shared_text_or_missing():
    from facet_probe.report.provenance import trial_costs

    shared = {"cost_usd": 0.25}
    trials = pd.DataFrame({
        "model": ["a", "a", "b", "a", "b", "c"],
        "provenance": [shared, shared, '{"cost_usd": 1.5}', {"cost_usd": None}, {"runner": "hf"}, shared],
        "usage": [{"prompt_tokens": 10, "completion_tokens": 2}, {"input_tokens": 5, "output_tokens": 1},
                  '{"prompt_tokens": 7}', None, {}, {"prompt_tokens": 1, "completion_tokens": 1}]})
    costs = trial_costs(trials)
    assert costs["a"] == {"cost_usd": 0.5, "prompt_tokens": 15, "completion_tokens": 3}
    assert costs["b"] == {"cost_usd": 1.5, "prompt_tokens": 7, "completion_tokens": 0}
    assert costs["c"] == {"cost_usd": 0.25, "prompt_tokens": 1, "completion_tokens": 1}
    unpriced = trial_costs(trials.assign(provenance=[{}] * 6))["a"]["cost_usd"]
    assert unpriced != unpriced  # NaN: no call recorded a cost (the report prints "-")


def test_trials_parquet_holds_what_arrow_makes_of_the_frame_with_each_shared_object_converted_once(tmp_path,
                                                                                                   monkeypatch):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from facet_probe.report.trials_parquet import write_trials_parquet

    monkeypatch.setattr(trials_parquet, "PARQUET_SLICE_ROWS", 3)  # two slices: 3 rows and 1

    order = [2, 0, 1]
    ids = ["a", "b"]
    trials = pd.DataFrame({
        "item_id": ["x", "y", "z", "w"],
        "permutation": [order, order, [1, 0, 2], np.nan],  # shared, own, and a missing key
        "component_ids": [ids, None, ids, ["c"]],
        "error": [None] * 4,
        "n_options": [3.0, np.nan, 4.0, 2.0],
        "usage": [{"prompt_tokens": 3}, None, {"prompt_tokens": 3}, {}],
    })
    written = pq.read_table(write_trials_parquet(trials, tmp_path / "trials.parquet"))
    assert pq.ParquetFile(tmp_path / "trials.parquet").num_row_groups == 2
    assert written.column_names == list(trials.columns)
    for name in ("item_id", "permutation", "component_ids", "error", "n_options"):
        assert written.column(name).combine_chunks().equals(pa.Array.from_pandas(trials[name])), name
    assert written.column("usage").to_pylist() == ['{"prompt_tokens": 3}', "null", '{"prompt_tokens": 3}', "{}"]
