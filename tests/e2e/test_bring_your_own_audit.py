"""A benchmark a researcher already has, end to end through `python -m facet_probe` (in this process): a Hugging Face
dataset in a local folder with its own column names, and a real lm-eval task YAML from the installed lm-eval package
(`dataset.task=arc_easy`) on a local copy of its data, each to report.md and explorer.html; a column mapping that
gives the facet nothing to order stops before any call with one line naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]

#: A dataset of one's own: the hub's layout, its own column names (no `question`, no `choices`).
OWN_ROWS = [
    {"qid": "q1", "prompt": "Which is a gas?", "options": ["rock", "steam", "ice"], "key": "B", "notes": ["a", "b"]},
    {"qid": "q2", "prompt": "Which is warm?", "options": ["sun", "snow", "ice"], "key": "A", "notes": ["c", "d"]},
    {"qid": "q3", "prompt": "Which is blue?", "options": ["grass", "blood", "sky"], "key": "C", "notes": ["e", "f"]},
]
OWN_MAPPING = ("dataset.columns.question=prompt", "dataset.columns.choices=options", "dataset.columns.answer=key",
               "dataset.columns.id=qid")


def audit(run_dir: Path, *overrides: str):
    return run_module("facet_probe", f"hydra.run.dir={run_dir}", "progress=false", *overrides, cwd=ROOT)


def write_parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def item_ids(run: Path) -> list[str]:
    return sorted(json.loads(line)["item_id"] for line in (run / "items.jsonl").read_text().splitlines())


def test_a_hub_dataset_in_a_local_folder_with_its_own_columns(tmp_path):
    write_parquet(tmp_path / "mine" / "data" / "test-00000-of-00001.parquet", OWN_ROWS)
    run = tmp_path / "run"
    ran = audit(run, "model=oracle", "facet=option_order", "dataset=hf", f"dataset.path={tmp_path / 'mine'}",
                *OWN_MAPPING, "limit=3")
    assert ran.returncode == 0, ran.stderr
    assert item_ids(run) == ["hf::q1", "hf::q2", "hf::q3"]
    (row,) = pd.read_csv(run / "summary.csv").to_dict("records")
    assert (row["n_items"], row["accuracy"], row["flip_rate"]) == (3, 1.0, 0.0)
    assert (run / "report.md").is_file() and (run / "explorer.html").is_file()


def test_a_mapping_without_what_the_facet_orders_stops_before_any_call(tmp_path):
    run = tmp_path / "run"
    ran = audit(run, "model=oracle", "facet=evidence_chunk_order", "dataset=hf", f"dataset.path={tmp_path}",
                *OWN_MAPPING, "limit=3")
    assert ran.returncode == 2
    (line,) = ran.stderr.strip().splitlines()
    assert line.startswith("error: dataset hf: evidence_chunk_order orders text_chunk components")
    assert "dataset.columns.chunks=<column>" in line
    assert not (run / "trials.jsonl").exists()


@pytest.mark.slow
def test_an_lm_eval_task_from_the_installed_package(tmp_path, monkeypatch):
    pytest.importorskip("lm_eval")  # the [lm_eval] extra ([dev] installs it)
    monkeypatch.setenv("FACET_PROBE_CACHE", str(tmp_path / "cache"))
    write_parquet(tmp_path / "ai2_arc" / "ARC-Easy" / "test-00000-of-00001.parquet", [
        {"id": "Mercury_1", "question": "Which is a gas?",
         "choices": {"text": ["rock", "steam", "ice", "wood"], "label": ["A", "B", "C", "D"]}, "answerKey": "B"},
        {"id": "Mercury_2", "question": "Which is warm?",
         "choices": {"text": ["sun", "snow", "ice"], "label": ["1", "2", "3"]}, "answerKey": "1"}])
    run = tmp_path / "run"
    ran = audit(run, "model=position_biased", "facet=option_order", "dataset=lm_eval", "dataset.task=arc_easy",
                f"dataset.path={tmp_path / 'ai2_arc'}", "limit=2")
    assert ran.returncode == 0, ran.stderr
    assert item_ids(run) == ["lm_eval::arc_easy:0", "lm_eval::arc_easy:1"]
    (row,) = pd.read_csv(run / "summary.csv").to_dict("records")
    assert row["n_items"] == 2 and row["parse_rate"] == 1.0
    assert (run / "report.md").is_file() and (run / "explorer.html").is_file()
