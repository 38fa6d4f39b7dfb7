"""Shared upstream I/O: locating files, reading parquet batch-wise, resolving images, caching items."""

from __future__ import annotations

import hashlib
import os
import pickle
from importlib.metadata import entry_points
from pathlib import Path

import pyarrow as pa
import pytest
import upstream_fixtures as fx

from facet_probe.core.items import ItemError
from facet_probe.datasets import hub
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.mmlu_pro import MMLUPro
from facet_probe.datasets.mramg import MRAMG

UP = hub.Upstream("org/data", ("data/test-*.parquet", "extra.json"))


def test_a_local_copy_with_every_upstream_file_is_used_as_is(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test-00000-of-00001.parquet").write_bytes(b"x")
    (tmp_path / "extra.json").write_text("{}")
    assert hub.locate("demo", UP, tmp_path) == tmp_path


def test_a_local_copy_missing_a_file_names_it_the_folder_and_the_download_command(tmp_path, offline):
    (tmp_path / "extra.json").write_text("{}")
    with pytest.raises(DatasetUnavailable) as err:
        hub.locate("demo", UP, tmp_path)
    message = str(err.value)
    assert "data/test-*.parquet" in message and "extra.json" not in message.split(":")[1]
    assert str(tmp_path) in message and "`hf download org/data --repo-type dataset" in message
    # the command is one the set-up installs (huggingface_hub's `hf`; it no longer ships `huggingface-cli`)
    command = message.split("`")[1].split()[0]
    assert command in {ep.name for ep in entry_points(group="console_scripts") if ep.module.startswith("huggingface_hub")}


def test_a_dataset_off_the_hub_points_at_its_homepage(tmp_path):
    up = hub.Upstream(None, ("a.jsonl.gz",), homepage="https://example.org/data")
    with pytest.raises(DatasetUnavailable, match="Fetch them from https://example.org/data"):
        hub.locate("demo", up, tmp_path)


def test_parquet_is_read_batch_wise_with_file_and_row_positions(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    files = [
        fx.write_parquet(
            tmp_path / f"p{k}.parquet", [{"id": 10 * k + i, "text": "t"} for i in range(5)], schema
        )
        for k in range(2)
    ]
    rows = list(hub.iter_parquet(files, ["id"], batch_size=2))
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    assert [r["_row"] for r in rows[:6]] == [0, 1, 2, 3, 4, 0] and "text" not in rows[0]
    taken = hub.take_parquet_rows(files[1], [4, 1], ["text", "id"], batch_size=2)
    assert {i: r["id"] for i, r in taken.items()} == {1: 11, 4: 14}
    with pytest.raises(ItemError, match="missing column"):
        list(hub.iter_parquet(files, ["id", "answer"]))


def test_the_path_leaf_of_an_image_column_counts_images_without_their_bytes(tmp_path):
    root = fx.mantis_eval(tmp_path / "m", n=2)
    file = root / "mantis_eval" / "test-00000-of-00001.parquet"
    leaf = hub.leaf_path(file, "images", "path")
    row = next(hub.iter_parquet([file], ["id", leaf]))
    assert len(row["images"]) == 3 and "bytes" not in row["images"][0]


def test_images_are_found_by_relative_path_or_file_name_in_folders_and_zips(tmp_path, offline):
    (tmp_path / "imgs" / "sub").mkdir(parents=True)
    (tmp_path / "imgs" / "sub" / "a.png").write_bytes(fx.image_bytes(1))
    fx.write_zip(tmp_path / "more.zip", {"pack/b.jpg": fx.image_bytes(2, "JPEG")})
    store = hub.ImageStore("demo", folders=[tmp_path / "imgs"], zips=[tmp_path / "more.zip"])
    assert store.get("sub/a.png", "demo::1").sha256 == hashlib.sha256(fx.image_bytes(1)).hexdigest()
    b = store.get("b.jpg", "demo::1")
    assert b.sha256 == hashlib.sha256(fx.image_bytes(2, "JPEG")).hexdigest()
    assert b.path.startswith(os.environ["FACET_PROBE_CACHE"])  # extracted once into the cache
    with pytest.raises(ItemError, match=r"item demo::9: image file 'c.png' not found in .*imgs"):
        store.get("c.png", "demo::9")


def test_an_image_column_without_bytes_is_a_clear_error():
    with pytest.raises(ItemError, match="item x::1: figure has no bytes"):
        hub.hf_image({"bytes": None, "path": "gone.png"}, "x::1", "figure")


def test_letter_answers_map_to_choice_positions():
    assert [hub.letter_index(a, 4) for a in ("A", "(c)", " D ", "E", "AB", None)] == [
        0,
        2,
        3,
        None,
        None,
        None,
    ]


def test_a_converted_sample_is_cached_and_rebuilt_when_the_upstream_file_changes(
    tmp_path, offline, monkeypatch
):
    root = fx.mmlu_pro(tmp_path / "mp")
    cached = tmp_path / "fp-cache" / "items"
    first = MMLUPro(path=str(root), n=5).load()
    assert len(list(cached.glob("mmlu_pro-*"))) == 1

    def no_scan(self):
        raise AssertionError("the cached sample should have been used")

    scan = MMLUPro.candidates
    monkeypatch.setattr(MMLUPro, "candidates", no_scan)
    assert MMLUPro(path=str(root), n=5).load() == first
    assert MMLUPro(path=str(root), n=5).load(limit=2) == first[:2]
    monkeypatch.setattr(MMLUPro, "candidates", scan)
    fx.mmlu_pro(root, n=40)  # the upstream file changed: its sample is converted and cached anew
    changed = MMLUPro(path=str(root), n=5).load()
    assert "mmlu_pro::106" in {it.item_id for it in changed}  # a row only the new file has
    assert len(list(cached.glob("mmlu_pro-*"))) == 2


class Planted:
    """A pickle that runs code when loaded: it makes the folder `marker`."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def test_a_pickle_planted_in_a_shared_cache_is_never_loaded_and_the_sample_is_rebuilt(tmp_path, offline):
    """The items cache is data (JSON lines of the item records), never a pickle: a shared cache folder would make
    a planted pickle code run by whoever loads the dataset. A pickle where a cache file (or an old `.pkl` cache
    file) would be is a miss: the sample is converted again and the planted code never runs."""
    root = fx.mmlu_pro(tmp_path / "mp")
    fresh = MMLUPro(path=str(root), n=5).load()
    (written,) = (tmp_path / "fp-cache" / "items").glob("mmlu_pro-*")
    with written.open("rb") as fh:
        assert not fh.read(2).startswith(b"\x80")  # not a pickle (protocol 2+ starts with 0x80)
    marker = tmp_path / "code-ran"
    for path in {written, written.with_suffix(".pkl")}:
        path.write_bytes(pickle.dumps({"items": [], "skipped": {}, "payload": Planted(marker)}))
    again = MMLUPro(path=str(root), n=5).load()
    assert not marker.exists(), "the planted pickle ran"
    assert again == fresh


def test_a_cached_sample_whose_extracted_images_were_cleaned_up_is_rebuilt(tmp_path, offline):
    root = fx.mramg(tmp_path / "mramg", n=3)
    first = MRAMG(path=str(root), n=2).load()
    extracted = [Path(img.path) for it in first for img in it.images() if img.path]
    assert extracted and all(str(p).startswith(os.environ["FACET_PROBE_CACHE"]) for p in extracted)
    for path in extracted:
        path.unlink()
    assert MRAMG(path=str(root), n=2).load() == first  # a miss: extracted again, not items pointing nowhere
    assert all(p.is_file() for p in extracted)
