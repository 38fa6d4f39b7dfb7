"""The explorer page's data at scale: an index inside the page and the items' details in chunks, inside the page
for a small run and in `explorer_data/` files beside it for a large one; a rebuild leaves only its own chunk
files, and a write that fails leaves the old page whole with its data."""

from __future__ import annotations

import json

import pytest

from facet_probe.report.explorer import chunks as chunks_module
from facet_probe.report.explorer import page as page_module
from facet_probe.report.explorer.chunks import split
from facet_probe.report.explorer.page import DATA_DIR, PAGE, RECORD, read_page, write_page


def blob(n_items: int, models=("m1", "m2")) -> dict:
    """A page's data as `data.Blob.to_json` makes it: `n_items` items, each model's K = 2 trials, their prompts."""
    items, prompts = [], {}
    for i in range(n_items):
        cells = {}
        for m in models:
            trials = []
            for o in range(2):
                h = f"h{i}-{o}"
                prompts[h] = {"recovered": "exact", "rendered_hash": h, "s": 0, "labels": ["A", "B"], "format": "letter",
                              "m": [["user", [f"question {i}, ordering {o}", {"img": f"img{i}"}]]]}
                trials.append({"o": o, "r": 0, "p": [o, 1 - o], "h": h, "seen": "exact", "out": f"Answer: {'AB'[o]}",
                               "think": None, "a": "AB"[o], "n": "AB"[o], "mean": "yes", "c": o == 0, "ps": "ok",
                               "err": None, "j": []})
            cells[m] = {"run": "the run", "st": "flipped", "pe": False, "acc": 0.5, "trials": trials}
        items.append({"key": f"f/item{i}", "id": f"item{i}", "ds": "d", "f": "f", "q": f"question {i}",
                      "choices": ["yes", "no"], "gold": "yes", "models": cells})
    images = {f"img{i}": f"data:image/png;base64,{i:04d}" for i in range(n_items)}
    return {"title": "t", "runs": [{"name": "the run", "kind": "audit", "provenance": {}}], "items": items,
            "prompts": prompts, "systems": ["be brief"], "images": images, "attack": [],
            "recovery": {"prompts": len(prompts), "differs": 0, "unavailable": 0}}


@pytest.fixture
def in_files(monkeypatch):
    """Every page's chunks in files, one item per chunk (as a paper-scale page has them)."""
    monkeypatch.setattr(page_module, "INLINE_BYTES", 0)
    monkeypatch.setattr(chunks_module, "CHUNK_BYTES", 1)


def chunk_files(folder):
    """The files in DATA_DIR but the record of the chunk files written (`page.RECORD`)."""
    data_dir = folder / DATA_DIR
    return sorted(p.name for p in data_dir.iterdir() if p.name != RECORD) if data_dir.exists() else []


def test_the_index_holds_no_trial_and_the_chunks_give_the_data_back():
    data = blob(5)
    parts = split(data, chunk_bytes=3_000)
    assert 1 < len(parts.chunks) < 5  # whole items, several per chunk
    assert "trials" not in str(parts.index["items"]) and "Answer" not in str(parts.index)
    assert parts.index["n_trials"] == 5 * 2 * 2 and parts.index["run_names"] == ["the run"]
    assert [it["ch"] for it in parts.index["items"]] == sorted(it["ch"] for it in parts.index["items"])
    assert chunks_module.merge(parts.index, [json.loads(c) for c in parts.chunks]) == data


def test_a_small_page_holds_its_chunks_and_a_large_one_has_them_beside_it(tmp_path, monkeypatch):
    page = write_page(blob(3), tmp_path)
    assert chunk_files(tmp_path) == [] and 'id="chunk-0"' in page.read_text()
    assert read_page(page) == blob(3)

    monkeypatch.setattr(page_module, "INLINE_BYTES", 0)
    write_page(blob(3), tmp_path)
    files = chunk_files(tmp_path)
    assert files and 'id="chunk-0"' not in page.read_text()
    assert read_page(page) == blob(3)
    index = page.read_text().split('<script id="data" type="application/json">')[1].split("</script>")[0]
    token = json.loads(index)["chunks"]["token"]
    assert all(f.startswith(token + "-") for f in files)


def test_a_rebuild_with_fewer_items_leaves_no_stale_chunk(tmp_path, in_files, monkeypatch):
    write_page(blob(6), tmp_path)
    before = chunk_files(tmp_path)
    assert len(before) == 6
    (tmp_path / DATA_DIR / "notes.txt").write_text("the user's own file")  # not ours: left alone

    page = write_page(blob(2, models=("m1",)), tmp_path)
    after = chunk_files(tmp_path)
    assert len(after) == 3 and "notes.txt" in after and not set(after) & set(before)
    assert read_page(page) == blob(2, models=("m1",))

    (tmp_path / DATA_DIR / "notes.txt").unlink()
    monkeypatch.setattr(page_module, "INLINE_BYTES", 8_000_000)  # a small page again: it holds its data
    write_page(blob(2), tmp_path)
    assert not (tmp_path / DATA_DIR).exists()
    assert read_page(page) == blob(2)


def test_a_build_that_fails_leaves_the_old_page_whole_with_its_chunks(tmp_path, in_files, monkeypatch):
    write_page(blob(4), tmp_path)
    old = (tmp_path / PAGE).read_text()
    real = page_module.atomic_write_text

    def no_page(path, text):
        if path.name == PAGE:
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(page_module, "atomic_write_text", no_page)
    with pytest.raises(OSError):
        write_page(blob(1), tmp_path)
    assert (tmp_path / PAGE).read_text() == old
    assert read_page(tmp_path / PAGE) == blob(4)  # every chunk the old page names is still there
    monkeypatch.setattr(page_module, "atomic_write_text", real)
    write_page(blob(1), tmp_path)  # the next build clears what the failed one wrote
    assert len(chunk_files(tmp_path)) == 1 and read_page(tmp_path / PAGE) == blob(1)


def test_a_chunk_file_of_another_build_is_refused(tmp_path, in_files):
    page = write_page(blob(2), tmp_path)
    first = tmp_path / DATA_DIR / chunk_files(tmp_path)[0]
    first.write_text(first.read_text().replace(first.name[:12], "0" * 12, 1))
    with pytest.raises(ValueError, match="is not this page's chunk file: build the page again"):
        read_page(page)


def test_numpy_scalars_in_an_object_column_reach_the_page_as_json_values(tmp_path):
    """Columns are read whole (`data._values`): a mixed object column's numpy scalars are not spelt as strings."""
    import numpy as np
    import pandas as pd

    from facet_probe.report.explorer.data import Blob

    trials = pd.DataFrame({"model": ["m", "m"], "facet": ["f", "f"], "dataset": ["d", "d"], "item_id": ["i", "i"],
                           "ordering_idx": [0, 1], "repeat_idx": [0, 0], "correct": pd.Series([np.bool_(True), None], dtype=object),
                           "answer_normalized": pd.Series([np.int64(2), np.nan], dtype=object)})
    data = Blob(tmp_path, "t")
    data.add_run("r", trials, {}, pd.DataFrame(), {})
    (item,) = data.to_json()["items"]
    assert [(t["c"], t["n"]) for t in item["models"]["m"]["trials"]] == [(True, 2), (None, None)]
    assert read_page(write_page(data.to_json(), tmp_path))["items"][0]["models"]["m"]["trials"][0]["c"] is True
