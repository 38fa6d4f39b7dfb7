"""The columnar copy of a trials file (`store.columnar`): the frame read from the copy is the frame parsed from the
JSONL, cell for cell (dtypes, None against NaN, lists and dicts), on audit run folders, FACET-PROBE v0.0.1 records,
shards, resumed runs, torn tails; a copy that does not match its JSONL now is never read; a copy that cannot be
written is no error."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from facet_probe.store import columnar, reading
from facet_probe.store.reading import TRIALS_FILE, load_trial_frame
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(autouse=True)
def copy_every_file(monkeypatch):
    """Copies of files of any size (the audits and fixtures here are far below MIN_BYTES)."""
    monkeypatch.setattr(columnar, "MIN_BYTES", 0)


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> Path:
    """An audit's run folder (the offline panel, K=3, two repeats), written with copies of any size."""
    run = tmp_path_factory.mktemp("columnar") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(columnar, "MIN_BYTES", 0)
        proc = run_module("facet_probe", f"hydra.run.dir={run}", "progress=false", "model=seeded_random",
                          "limit=3", "k=3", "repeats=2", cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run


def parsed(inputs, **kw) -> pd.DataFrame:
    """The frame parsed from the JSONL alone: no copy read, none written."""
    files = reading.trial_files(inputs)
    saved = {f: columnar.copy_path(f).read_bytes() for f in files if columnar.copy_path(f).is_file()}
    for f in saved:
        columnar.copy_path(f).unlink()
    old = columnar.MIN_BYTES
    columnar.MIN_BYTES = 1 << 62
    try:
        return load_trial_frame(inputs, **kw)
    finally:
        columnar.MIN_BYTES = old
        for f, data in saved.items():
            columnar.copy_path(f).write_bytes(data)


def from_copies(inputs, **kw) -> pd.DataFrame:
    """The frame read with every file's copy current (built first where missing); fails if one is not read."""
    load_trial_frame(inputs)
    for f in reading.trial_files(inputs):
        assert columnar.read_copy(f) is not None, f"{f}: no current copy"
    return load_trial_frame(inputs, **kw)


def assert_same_cells(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Equal frames, strictly: columns, dtypes, index, and each cell's type and repr (None is not NaN, a list
    is not an array, 1 is not 1.0)."""
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for name in a.columns:
        assert [(type(v), repr(v)) for v in a[name].tolist()] == [(type(v), repr(v)) for v in b[name].tolist()], name


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_the_audits_report_leaves_a_current_copy_and_it_reads_as_the_jsonl(audited):
    trials = audited / TRIALS_FILE
    assert columnar.copy_path(trials).is_file()
    assert columnar.read_copy(trials) is not None  # the run's own report left it, current
    frame = load_trial_frame(audited)
    assert frame["permutation"].map(type).eq(list).all()
    assert frame["provenance"].map(type).eq(dict).all()
    assert_same_cells(from_copies(audited), parsed(audited))


@pytest.mark.slow  # its module fixture audits (1.7-3.6 s): every test using it is left out of `make test-fast`
def test_a_copy_is_never_read_as_trials(audited):
    assert reading.folder_trial_files(audited) == [audited / TRIALS_FILE]
    assert reading.trial_files(audited.parent) == [audited / TRIALS_FILE]


@pytest.mark.slow  # its module fixture audits (1.7-3.6 s): every test using it is left out of `make test-fast`
def test_columns_and_drop_read_a_subset_of_the_same_frame(audited):
    full = load_trial_frame(audited)
    some = load_trial_frame(audited, columns=["seed", "permutation"])
    assert {"seed", "permutation", *reading.FRAME_COLUMNS} >= set(some.columns) >= {"seed", "permutation"}
    assert_same_cells(some, full[list(some.columns)])
    lean = load_trial_frame(audited, drop=["provenance", "usage", "trial_key"])  # a frame column is never dropped
    assert "provenance" not in lean and "usage" not in lean and "trial_key" in lean
    assert_same_cells(lean, full[list(lean.columns)])
    assert_same_cells(parsed(audited, drop=["provenance"]), full.drop(columns="provenance"))


def test_reference_v0_0_1_records(tmp_path):
    shutil.copy(FIXTURES / "reference_v0_0_1" / TRIALS_FILE, tmp_path / TRIALS_FILE)
    frame = from_copies(tmp_path)
    assert "trial_key" in frame and frame["trial_key"].notna().all()
    assert_same_cells(frame, parsed(tmp_path))


@pytest.mark.parametrize("fixture", ["store_v1", "store_v1_mixed_k", "store_shared_orderings"])
def test_older_stores(tmp_path, fixture):
    shutil.copytree(FIXTURES / fixture, tmp_path / "run")
    assert_same_cells(from_copies(tmp_path / "run"), parsed(tmp_path / "run"))


def split_into_shards(audited: Path, folder: Path) -> list[dict]:
    """The audit's records over a trials file and two shards, one shard with failed calls (an `error` column
    the others lack) and one record without `usage`: columns that differ between files."""
    recs = [json.loads(line) for line in lines(audited / TRIALS_FILE)]
    for rec in recs[5:8]:
        rec.update(error="timeout", answer_normalized=None, raw_output=None)
    recs[-1].pop("usage")
    parts = {folder / TRIALS_FILE: recs[:5], folder / "shards" / "a.jsonl": recs[5:12],
             folder / "shards" / "b.jsonl": recs[12:]}
    for path, part in parts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        for rec in part if path.name != "a.jsonl" else ():
            rec.pop("error", None)  # only the shard with failed calls has the column
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
    return recs


def test_shards_whose_columns_differ_read_as_one_frame_of_every_record(audited, tmp_path):
    recs = split_into_shards(audited, tmp_path)
    files = reading.folder_trial_files(tmp_path)
    assert len(files) == 3
    assert_same_cells(from_copies(tmp_path), parsed(tmp_path))
    # files put together as one frame of all their records would be (what the reader did before copies)
    frames = [columnar.read_copy(f).frame for f in files]
    assert_same_cells(reading.combine_frames(frames), pd.DataFrame.from_records(recs))


def test_a_resumed_run_with_duplicate_keys_keeps_the_latest(audited, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials = folder / TRIALS_FILE
    first = json.loads(lines(trials)[0])
    with trials.open("a") as fh:  # a retry of the first trial, written again by a resumed run
        fh.write(json.dumps({**first, "raw_output": "retried", "latency_s": 1.5}) + "\n")
    frame = from_copies(folder)
    assert not columnar.read_copy(trials).unique_keys  # its copy says the file repeats a key...
    assert (frame.loc[frame["trial_key"] == first["trial_key"], "raw_output"] == "retried").all()
    assert frame["trial_key"].is_unique  # ...so the repeat is dropped, the latest kept
    assert_same_cells(frame, parsed(folder))


def test_files_whose_copies_each_hold_unique_keys_still_lose_a_key_they_share(audited, tmp_path):
    """A copy's word that its keys are unique is about its own file: two shards of one run can share a trial (a
    retry in the other shard), and the reader keeps the latest."""
    trials = audited / TRIALS_FILE
    from_copies(audited)
    assert columnar.read_copy(trials).unique_keys
    (tmp_path / "shards").mkdir()
    first, *rest = lines(trials)
    (tmp_path / "shards" / "a.jsonl").write_text("".join(line + "\n" for line in [first, *rest]))
    retried = {**json.loads(first), "raw_output": "retried"}
    (tmp_path / "shards" / "b.jsonl").write_text(json.dumps(retried) + "\n")
    frame = from_copies(tmp_path)
    assert all(columnar.read_copy(f).unique_keys for f in reading.trial_files(tmp_path))
    assert len(frame) == len(load_trial_frame(audited)) and frame["trial_key"].is_unique
    assert (frame.loc[frame["trial_key"] == retried["trial_key"], "raw_output"] == "retried").all()
    assert_same_cells(frame, parsed(tmp_path))


def test_a_torn_last_line_is_skipped_with_the_warning_from_the_copy_too(audited, tmp_path, caplog):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials = folder / TRIALS_FILE
    with trials.open("a") as fh:
        fh.write(lines(trials)[0][:40])  # a kill mid-write
    expected = parsed(folder)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        frame = from_copies(folder)
    assert columnar.read_copy(trials).torn_tail
    assert sum("torn last line" in r.getMessage() for r in caplog.records) == 2  # the read that built it, the copy
    assert_same_cells(frame, expected)


def test_a_file_appended_to_after_its_copy_was_built_is_read_again(audited, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials = folder / TRIALS_FILE
    before = from_copies(folder)
    extra = {**json.loads(lines(trials)[0]), "trial_key": "appended-after-the-copy", "ordering_idx": 99}
    with trials.open("a") as fh:
        fh.write(json.dumps(extra) + "\n")
    assert columnar.read_copy(trials) is None  # stale: never trusted
    frame = load_trial_frame(folder)
    assert len(frame) == len(before) + 1 and "appended-after-the-copy" in set(frame["trial_key"])
    assert columnar.read_copy(trials) is not None  # rebuilt by that read
    assert_same_cells(load_trial_frame(folder), parsed(folder))


def test_an_edit_within_the_first_bytes_of_the_same_size_is_read_again(audited, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials = folder / TRIALS_FILE
    from_copies(folder)
    data = trials.read_bytes()
    trials.write_bytes(data.replace(b'"ordering_idx": 0', b'"ordering_idx": 7', 1))
    assert trials.stat().st_size == len(data)
    assert columnar.read_copy(trials) is None
    assert_same_cells(load_trial_frame(folder), parsed(folder))


@pytest.mark.parametrize("damage", ["torn", "garbage", "foreign", "version"])
def test_a_damaged_or_foreign_copy_is_rebuilt_never_trusted(audited, tmp_path, monkeypatch, damage):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials, copy = folder / TRIALS_FILE, columnar.copy_path(folder / TRIALS_FILE)
    from_copies(folder)
    if damage == "torn":
        copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 2])
    elif damage == "garbage":
        copy.write_bytes(b"not parquet")
    elif damage == "foreign":  # another file's copy put in its place
        other = tmp_path / "other" / TRIALS_FILE
        other.parent.mkdir()
        other.write_text("".join(lines(trials)[:3]))
        load_trial_frame(other)
        shutil.copy(columnar.copy_path(other), copy)
    else:
        monkeypatch.setattr(columnar, "FORMAT_VERSION", columnar.FORMAT_VERSION + 1)
    assert columnar.read_copy(trials) is None
    assert_same_cells(load_trial_frame(folder), parsed(folder))
    assert columnar.read_copy(trials) is not None  # rebuilt


def test_a_copy_that_cannot_be_written_is_no_error(audited, tmp_path, caplog):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials = folder / TRIALS_FILE
    columnar.copy_path(trials).unlink()
    columnar.copy_path(trials).mkdir()  # the rename over it fails, as in a folder it cannot write
    with caplog.at_level(logging.DEBUG, logger="facet_probe.store.columnar"):
        frame = load_trial_frame(folder)
    assert "no columnar copy written" in caplog.text
    assert columnar.copy_path(trials).is_dir() and not [p for p in folder.iterdir() if ".tmp" in p.name]  # no temp left
    assert_same_cells(frame, parsed(folder))


def test_small_files_get_no_copy(audited, tmp_path, monkeypatch):
    monkeypatch.setattr(columnar, "MIN_BYTES", 1 << 20)
    shutil.copy(audited / TRIALS_FILE, tmp_path / TRIALS_FILE)
    load_trial_frame(tmp_path)
    assert not columnar.copy_path(tmp_path / TRIALS_FILE).exists()


def test_values_of_every_json_type_round_trip(tmp_path):
    """Columns of one plain type, of mixed types, lists, dicts, None, absent keys and NaN."""
    base = {"facet": "f", "dataset": "d", "item_id": "i", "model": "m"}
    recs = [
        {**base, "ordering_idx": 0, "mixed": 1, "maybe": None, "nested": {"a": [1, 2.5, None]}, "flag": True,
         "num": 1, "text": "x", "big": 2**70},
        {**base, "ordering_idx": 1, "mixed": "one", "nested": [], "flag": False, "num": None, "text": None,
         "big": 1},
        {**base, "ordering_idx": 2, "mixed": [1], "maybe": ["s"], "nested": None, "flag": None, "num": 2.5,
         "text": "é\u2028\"q\"", "odd": float("nan"), "big": -1},
    ]
    path = tmp_path / TRIALS_FILE
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))  # NaN as json writes it: read by the slow path
    frame = from_copies(path)
    assert_same_cells(frame, parsed(path))
    assert isinstance(frame.loc[0, "nested"]["a"], list) and frame.loc[1, "nested"] == []
    assert frame.loc[0, "maybe"] is None and isinstance(frame.loc[1, "maybe"], float)  # null vs absent
    assert np.isnan(frame.loc[2, "odd"])


def test_reading_a_copy_sets_arrows_pool_to_jemalloc_unless_the_user_chose_one():
    import os
    import subprocess
    import sys

    import pyarrow as pa

    from facet_probe.store import columnar

    if "jemalloc" not in pa.supported_memory_backends():  # a pyarrow built without it keeps its default
        pytest.skip(f"this pyarrow has no jemalloc ({pa.supported_memory_backends()})")
    assert columnar.use_jemalloc() == "jemalloc"
    # a fresh process: the user's choice (the environment variable Arrow reads) is kept
    code = "from facet_probe.store.columnar import use_jemalloc; print(use_jemalloc())"
    chosen = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"},
                            capture_output=True, text=True, check=True)
    assert chosen.stdout.strip() == "system"


def test_the_trial_count_hint_is_the_copys_rows_or_the_files_bytes_over_the_hint(audited, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(audited, folder)
    trials = folder / TRIALS_FILE
    rows = len(lines(trials))
    from_copies(folder)
    assert columnar.copy_rows(trials) == rows
    assert reading.trial_count_hint(folder) == rows
    columnar.copy_path(trials).unlink()  # no copy: the bytes tell
    assert columnar.copy_rows(trials) is None
    assert reading.trial_count_hint(folder) == trials.stat().st_size // reading.TRIAL_BYTES_HINT
    columnar.copy_path(trials).write_bytes(b"not parquet")  # a damaged copy is no hint either
    assert reading.trial_count_hint([folder]) == trials.stat().st_size // reading.TRIAL_BYTES_HINT
