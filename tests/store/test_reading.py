"""Reading stored trials: run folders, shards, torn lines, duplicates, FACET-PROBE v0.0.1 files."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from facet_probe.core.trials import PARSE_ERROR, Trial
from facet_probe.metrics.flips import compute_metrics
from facet_probe.store.reading import iter_records, load_trial_frame, trial_files

# FACET-PROBE v0.0.1 records: no trial_key, repeat_idx, parse_status or n_options; null = unparseable
REFERENCE = [
    {"facet": "option_order", "dataset": "toy", "model": "toy-model", "item_id": "toy::1", "ordering_idx": 0,
     "permutation": [0, 1, 2], "answer_normalized": "0", "gold_normalized": "0", "correct": True,
     "score_kind": "option_content_idx", "prompt_hash": "h0", "raw_output": "Answer: A"},
    {"facet": "option_order", "dataset": "toy", "model": "toy-model", "item_id": "toy::1", "ordering_idx": 1,
     "permutation": [1, 0, 2], "answer_normalized": "1", "gold_normalized": "0", "correct": False,
     "score_kind": "option_content_idx", "prompt_hash": "h1", "raw_output": "Answer: A"},
    {"facet": "option_order", "dataset": "toy", "model": "toy-model", "item_id": "toy::1", "ordering_idx": 2,
     "permutation": [2, 1, 0], "answer_normalized": None, "gold_normalized": "0", "correct": None,
     "score_kind": "option_content_idx", "prompt_hash": "h2", "raw_output": "I am not sure."},
]


def ours(key: str, ordering: int, answer: str = "A", error: str | None = None, repeat: int = 0) -> dict:
    trial = Trial(trial_key=key, call_key="c" + key, model="m", facet="option_order", dataset="d",
                  item_id="d::1", ordering_idx=ordering, repeat_idx=repeat, permutation=[0, 1],
                  component_ids=["choice0", "choice1"], prompt_hash="h", mode="direct", n_options=2,
                  raw_output=f"Answer: {answer}", answer_normalized=answer, gold_normalized="A",
                  correct=answer == "A", score_kind="inverse_permutation", parse_status="ok", error=error)
    return json.loads(trial.to_json())


def write_jsonl(path, records, tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def test_a_run_folder_reads_its_trials_and_shards(tmp_path):
    write_jsonl(tmp_path / "trials.jsonl", [ours("k0", 0)])
    write_jsonl(tmp_path / "shards" / "trials.shard1.jsonl", [ours("k1", 1, "B")])
    assert [p.name for p in trial_files(tmp_path)] == ["trials.jsonl", "trials.shard1.jsonl"]
    frame = load_trial_frame(tmp_path)
    assert sorted(frame["trial_key"]) == ["k0", "k1"]


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / "trials.jsonl"
    write_jsonl(path, [ours("k0", 0), ours("k1", 1)], tail='{"trial_key": "k2", "model": "m", "fac')
    with caplog.at_level(logging.WARNING):
        frame = load_trial_frame(path)
    assert list(frame["trial_key"]) == ["k0", "k1"]
    assert "torn last line" in caplog.text


@pytest.mark.parametrize("bad", ["middle", "terminated_last"])
def test_a_malformed_complete_line_is_an_error_naming_file_and_line(tmp_path, bad):
    path = tmp_path / "trials.jsonl"
    good = [json.dumps(ours("k0", 0)), json.dumps(ours("k1", 1))]
    lines = [good[0], "{not json", good[1]] if bad == "middle" else [*good, "{not json"]
    path.write_text("\n".join(lines) + "\n")
    line_no = 2 if bad == "middle" else 3
    with pytest.raises(ValueError, match=rf"trials.jsonl:{line_no}: malformed trial line"):
        list(iter_records(path))


def test_duplicates_keep_the_latest_success_and_errors_are_dropped(tmp_path):
    path = tmp_path / "trials.jsonl"
    write_jsonl(path, [ours("k0", 0, "A"), ours("k0", 0, "B"), ours("k1", 1, error="HTTP 500"),
                       ours("k2", 2, error="timeout"), ours("k2", 2, "A")])
    frame = load_trial_frame(path).set_index("trial_key")
    assert sorted(frame.index) == ["k0", "k2"]
    assert frame.loc["k0", "answer_normalized"] == "B"


def test_reference_files_get_repeat_zero_keys_and_parse_status(tmp_path):
    path = tmp_path / "reference.jsonl"
    write_jsonl(path, REFERENCE)
    frame = load_trial_frame(path)
    assert list(frame["repeat_idx"]) == [0, 0, 0]
    assert frame["trial_key"].is_unique
    assert list(frame["trial_key"])[0] == "toy-model|option_order|toy|toy::1|0|0"
    assert list(frame["parse_status"]) == ["ok", "ok", "parse_error"]


def test_reference_and_our_records_mix(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", REFERENCE)
    write_jsonl(tmp_path / "b.jsonl", [ours("k0", 0), ours("k1", 1, repeat=1)])
    frame = load_trial_frame([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    assert len(frame) == 5
    assert frame["trial_key"].is_unique
    assert frame["repeat_idx"].tolist() == [0, 0, 0, 0, 1]


def test_metrics_run_on_reference_files(tmp_path):
    path = tmp_path / "reference.jsonl"
    write_jsonl(path, REFERENCE)
    result = compute_metrics(load_trial_frame(path), n_boot=50)
    item = result.items.iloc[0]
    assert (item.n_orderings, item.n_parsed, item.n_options) == (3, 2, 3)
    assert (item.any_flip, item.any_flip_parsed, item.modal_answer) == (1, 1, "0")
    assert item.accuracy == pytest.approx(1 / 3)
    assert result.cells.iloc[0]["n_items"] == 1
    assert PARSE_ERROR not in set(result.items["modal_answer"])


def test_missing_inputs_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        load_trial_frame(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="is it a run folder"):
        load_trial_frame(tmp_path)
    (tmp_path / "trials.jsonl").write_text("")
    with pytest.raises(ValueError, match="no trials found"):
        load_trial_frame(tmp_path)
    write_jsonl(tmp_path / "trials.jsonl", [{"model": "m", "answer_normalized": "A"}])
    with pytest.raises(ValueError, match=r"trials.jsonl:1: not a trial record \(a JSON object without 'facet'"):
        load_trial_frame(tmp_path)


def test_the_frame_round_trips_every_trial_field(tmp_path):
    record = ours("k0", 0, "B")
    write_jsonl(tmp_path / "trials.jsonl", [record])
    row = load_trial_frame(tmp_path).iloc[0].to_dict()
    assert set(Trial.__dataclass_fields__) <= set(row)
    for name, value in record.items():
        assert row[name] == value or (value is None and pd.isna(row[name])), name
