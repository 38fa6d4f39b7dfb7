"""`store.run_folder`: every file of a run folder named in one place, the one rule for what a run folder is (and a
folder of them), and one reader per record with one error policy: a damaged record is a `RunFolderError` naming
the file (and line) and what to do; a record an older folder lacks reads as nothing recorded. Small hand-built
folders, no app run (the apps' side: test_damaged_run_folder.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from facet_probe.app.boundary import USER_ERRORS
from facet_probe.core.errors import RunFolderError
from facet_probe.store.run_folder import (
    FIX_CONFIG,
    FIX_IDENTITY,
    FIX_ITEMS,
    FIX_MANIFEST,
    FIX_STATUS,
    CellStatus,
    ModelStatus,
    RunFolder,
    RunStatus,
    folders_under,
    is_run_folder,
    run_inputs,
)
from facet_probe.store.run_status import StatusSettings, StatusWriter

STATUS = {"state": "complete", "started_at": "2026-12-06T08:59:11+00:00", "git_commit": "abc", "previous_sessions": 1,
          "settings": {"k": 2, "seed": 42, "repeats": 1, "limit": 3, "prompt_mode": "direct"},
          "versions": {"facet_probe": "0.1.0"}, "trials": 6, "trials_missing": 0, "elapsed_s": 2.5, "hint": None,
          "cells": [{"facet": "option_order", "dataset": "mcq", "items": 3, "skipped_rows": {"empty option": 2}}],
          "models": {"oracle": {"fingerprint": {"policy": "oracle"}, "fingerprint_hash": "eb13", "planned": 6,
                                "called": 6, "errors": 0, "seconds": 0.002, "migrated": 0}}}


def run_folder(tmp_path: Path, name: str = "run", *files: str) -> RunFolder:
    """A folder holding empty `files` (by default a trials file: a run folder)."""
    folder = tmp_path / name
    for file in files or ("trials.jsonl",):
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).touch()
    return RunFolder(folder)


def refused(read) -> str:
    """The message of the RunFolderError `read()` raises."""
    with pytest.raises(RunFolderError) as error:
        read()
    return str(error.value)


# -- the file names and the one rule ----------------------------------------------------------------------------------

def test_every_file_of_a_run_folder_is_named_by_it(tmp_path):
    folder = RunFolder(str(tmp_path))  # a str is taken as its path
    assert folder.path == tmp_path
    assert [p.name for p in (folder.config_file, folder.items_file, folder.manifest_file, folder.status_file,
                             folder.identity_file, folder.cost_file, folder.judgments_file, folder.report_file)] == [
        "config.yaml", "items.jsonl", "manifest.parquet", "run_status.json", "run_identity.json", "cost.json",
        "judgments.jsonl", "item_metrics.csv"]
    assert folder.trials_file() == tmp_path / "trials.jsonl"
    assert folder.trials_file("1/4") == tmp_path / "trials.shard-1-of-4.jsonl"
    assert folder.report_dir("1/4") == tmp_path / "shards" / "1-of-4"
    assert folder.report_dir("0/1") == folder.report_dir(None) == tmp_path
    with pytest.raises(ValueError, match="store.shard must look like 'i/n'"):
        folder.trials_file("x")


def test_a_run_folder_is_a_folder_holding_trials(tmp_path):
    assert is_run_folder(run_folder(tmp_path, "a").path)
    assert is_run_folder(run_folder(tmp_path, "b", "trials.shard-0-of-2.jsonl").path)
    assert is_run_folder(run_folder(tmp_path, "c", "shards/x.jsonl").path)  # the first layout's shards
    assert not is_run_folder(run_folder(tmp_path, "d", "item_metrics.csv", "run_status.json").path)  # a report only
    assert not is_run_folder(tmp_path / "a" / "trials.jsonl")  # a file is no folder
    sharded = run_folder(tmp_path, "e", "trials.jsonl", "trials.shard-1-of-2.jsonl", "trials.shard-0-of-2.jsonl")
    assert [p.name for p in sharded.trial_files()] == [
        "trials.jsonl", "trials.shard-0-of-2.jsonl", "trials.shard-1-of-2.jsonl"]
    assert [p.name for p in sharded.shard_trial_files()] == ["trials.shard-0-of-2.jsonl", "trials.shard-1-of-2.jsonl"]


def test_a_folder_of_run_folders_stands_for_the_runs_under_it(tmp_path):
    runs = [run_folder(tmp_path, name).path for name in ("m/b/direct", "m/a/direct", "sweep/0")]
    run_folder(tmp_path, "m/a/direct", "shards/0-of-2/item_metrics.csv")  # a shard's report: no run of its own
    run_folder(tmp_path, "m/report", "item_metrics.csv")  # a report over several runs: no trials
    assert folders_under(tmp_path) == sorted(runs)
    assert folders_under(runs[0]) == [runs[0]]  # a run folder stands for itself
    assert folders_under(tmp_path, lambda f: f.name == "report") == [tmp_path / "m" / "report"]  # another kind
    given = tmp_path / "m" / "b" / "direct" / "trials.jsonl"
    assert run_inputs([tmp_path / "m", given]) == [runs[1], runs[0], given]


def test_a_folder_holding_no_run_is_one_clear_error(tmp_path):
    (tmp_path / "notes").mkdir()
    with pytest.raises(FileNotFoundError, match="holds neither trials .* nor run folders"):
        run_inputs(tmp_path / "notes")
    with pytest.raises(FileNotFoundError, match="no such run folder or trials file"):
        run_inputs(str(tmp_path / "gone"))


# -- the records: typed, one error policy, nothing recorded where an older folder has none ----------------------------

def test_the_status_record_is_typed(tmp_path):
    folder = run_folder(tmp_path)
    folder.status_file.write_text(json.dumps(STATUS))
    status = folder.status()
    assert status.models == {"oracle": ModelStatus({"policy": "oracle"}, "eb13", 6, 6, 0)}
    assert status.cells == (CellStatus("option_order", "mcq", 3, {"empty option": 2}),)
    assert (status.state, status.settings["k"], status.trials, status.fingerprint_hashes()) == (
        "complete", 2, 6, {"oracle": "eb13"})


def test_what_an_older_folder_lacks_reads_as_nothing_recorded(tmp_path):
    folder = run_folder(tmp_path)
    assert folder.status() == RunStatus() and folder.status().fingerprint_hashes() == {}
    assert folder.identity() is None and folder.manifest(["k"]) is None and folder.config() is None
    assert folder.items() == {}


@pytest.mark.parametrize(("text", "words"), [
    ('{"state": "running",\n "models": {\n', ":3:1: not valid JSON (Expecting property name enclosed in double quotes)"),
    ("[1, 2]", ":1: a JSON array, not the object this file holds"),
    (json.dumps({**STATUS, "models": [1]}), ": not the record this file holds (Expected `object`, got `array` - at "
                                            "`$.models`)"),
    (json.dumps({**STATUS, "cells": [{"dataset": 3}]}), ": not the record this file holds (Expected `str | null`, got "
                                                        "`int` - at `$.cells[0].dataset`)"),
    (json.dumps({**STATUS, "trials": "six"}), ": not the record this file holds (Expected `int | null`, got `str` - "
                                              "at `$.trials`)"),
], ids=["not_json", "an_array", "models_an_array", "a_cell_of_another_type", "trials_a_string"])
def test_a_damaged_status_is_one_error_naming_the_file_and_the_fix(text, words, tmp_path):
    """run_status.json not JSON, or not the shape its writer writes (an app read `.get` of a list: AttributeError)."""
    folder = run_folder(tmp_path)
    folder.status_file.write_text(text)
    message = refused(folder.status)
    assert message.startswith(f"{folder.status_file}{words}") and message.endswith(f"damaged; {FIX_STATUS}")


@pytest.mark.parametrize(("text", "words"), [
    ('{"settings": {"k": 2,\n', ":2:1: not valid JSON"),
    ("[1, 2]\n", ":1: a JSON array, not the object this file holds"),
    ('{"settings": [1]}', ": not the record this file holds (Expected `object`, got `array` - at `$.settings`)"),
    ('{"k": 2}', ": not the record this file holds (Object missing required field `settings`)"),
], ids=["not_json", "an_array", "settings_an_array", "no_settings"])
def test_a_damaged_identity_is_one_error_naming_the_file_and_the_fix(text, words, tmp_path):
    folder = run_folder(tmp_path)
    folder.identity_file.write_text(text)
    message = refused(folder.identity)
    assert message.startswith(f"{folder.identity_file}{words}") and message.endswith(FIX_IDENTITY)


def test_a_damaged_manifest_is_one_error_naming_the_file_and_the_fix(tmp_path):
    folder = run_folder(tmp_path)
    pd.DataFrame({"facet": ["f"], "k": [2]}).to_parquet(folder.manifest_file)
    assert folder.manifest(["facet"])["k"].tolist() == [2]
    assert refused(lambda: folder.manifest(["facet", "seed"])) == (
        f"{folder.manifest_file}: a manifest without the columns 'seed'; {FIX_MANIFEST}")
    folder.manifest_file.write_bytes(folder.manifest_file.read_bytes()[:40])
    assert refused(folder.manifest).startswith(f"{folder.manifest_file}: not a readable Parquet file (")


@pytest.mark.parametrize(("line", "words"), [
    ('{"dataset": "d", "item', ":2:18: not valid JSON (Unterminated string starting)"),
    ('["d", 1]', ":2: not an item record (a JSON array)"),
    ('{"dataset": "d"}', ":2: not an item record (a JSON object without 'item_id')"),
], ids=["not_json", "an_array", "no_item_id"])
def test_a_damaged_items_line_is_one_error_naming_the_line_and_the_fix(line, words, tmp_path):
    folder = run_folder(tmp_path)
    folder.items_file.write_text(json.dumps({"dataset": "d", "item_id": "d::1"}) + "\n" + line + "\n")
    assert refused(folder.items) == f"{folder.items_file}{words}; {FIX_ITEMS}"


def test_items_are_keyed_by_dataset_and_id(tmp_path):
    folder = run_folder(tmp_path)
    records = [{"dataset": "a", "item_id": "1", "v": 1}, {"dataset": "b", "item_id": "1"}, {"dataset": "a",
                                                                                          "item_id": "1", "v": 2}]
    folder.items_file.write_text("".join(json.dumps(r) + "\n\n" for r in records))  # a blank line is no record
    assert folder.items() == {("a", "1"): records[2], ("b", "1"): records[1]}


def test_a_damaged_config_is_one_error_naming_the_file_and_the_fix(tmp_path):
    folder = run_folder(tmp_path)
    folder.config_file.write_text("k: 2\nprompt: {cot: true}\n")
    assert OmegaConf.select(folder.config(), "prompt.cot") is True
    folder.config_file.write_text("k: [2\n")
    assert refused(folder.config).startswith(f"{folder.config_file}: not readable YAML (")
    folder.config_file.write_text("- 1\n- 2\n")
    assert refused(folder.config) == (f"{folder.config_file}: a YAML list, not the mapping this file holds: the "
                                      f"file was damaged; {FIX_CONFIG}")


def test_a_damaged_record_is_a_user_error_every_app_prints_in_one_line():
    assert issubclass(RunFolderError, USER_ERRORS)


# -- writing the status: the fields it records, the folder passed in --------------------------------------------------

SETTINGS = StatusSettings(k=2, seed=42, repeats=1, limit=3, prompt_mode="direct")


def test_the_status_writer_takes_the_settings_it_records_and_counts_sessions(tmp_path):
    folder = run_folder(tmp_path)
    StatusWriter(folder, SETTINGS).write("prepared")
    first = folder.status()
    assert first.settings == {"k": 2, "seed": 42, "repeats": 1, "limit": 3, "prompt_mode": "direct"}
    assert (first.state, first.previous_sessions) == ("prepared", 0)
    StatusWriter(folder, SETTINGS).write("complete")
    assert folder.status().previous_sessions == 1


def test_the_status_writer_writes_a_damaged_status_again_with_a_warning(tmp_path, caplog):
    folder = run_folder(tmp_path)
    folder.status_file.write_text(json.dumps({**STATUS, "models": [1]}))
    StatusWriter(folder, SETTINGS).write("running")
    assert folder.status().previous_sessions == 1 and folder.status().models == {}
    assert f"{folder.status_file}: not the record this file holds" in caplog.text
    assert "this run writes it again" in caplog.text


def test_the_attack_counts_its_sessions_over_a_damaged_status(tmp_path):
    """The attack read its run_status.json with `json.loads`: a damaged one was a JSONDecodeError traceback."""
    from facet_probe.attack.outputs import AttackStatus

    (tmp_path / "run_status.json").write_text('{"state": "runn')
    AttackStatus(tmp_path, {"attack": "pgd"}).write("running")
    assert RunFolder(tmp_path).status().previous_sessions == 1
