"""Mixed-modality datasets: MRAMG recipes, MMDocRAG quotes and MultiModalQA contexts."""

from __future__ import annotations

import hashlib

import pytest
import upstream_fixtures as fx
import upstream_image_fixtures as efx
from test_reference_sampling import reference_src  # noqa: F401  (the reference's src, a pytest fixture)

from facet_probe.core.items import ComponentKind, ItemError
from facet_probe.datasets import mmdocrag, mmqa, mramg
from facet_probe.datasets.base import REPEATED_ID, DatasetUnavailable

T, IMG = ComponentKind.TEXT_CHUNK, ComponentKind.IMAGE


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_recipe_document_splits_at_its_image_markers_into_alternating_parts():
    assert mramg.split_doc("Mix. <PIC> Bake. <PIC>", [7, 8]) == [
        ("text", "Mix."),
        ("image", 7),
        ("text", "Bake."),
        ("image", 8),
    ]
    assert mramg.split_doc("One <PIC> marker", [7, 8]) is None
    assert mramg.parse_doc([5, "text", [1]]) == ("5", "text", [1])
    assert mramg.parse_doc({"id": 5, "content": "text", "images_list": [1]}) == ("5", "text", [1])


@pytest.mark.parametrize("unpacked", [False, True])
def test_mramg_items_interleave_text_and_recipe_images_from_the_archive_or_the_folder(
    tmp_path, offline, unpacked
):
    root = fx.mramg(tmp_path / "mr", unpacked=unpacked)
    items = {it.raw_id: it for it in mramg.MRAMG(path=str(root)).load_all()}
    assert "recipe_3" not in items  # its document's markers and images disagree
    item = items["recipe_0"]
    assert [c.kind for c in item.components] == [T, IMG, T, IMG, T]
    # image 1000 exists under RECIPE and under WIKI: the recipe one is used
    assert item.components[1].image.sha256 == sha(fx.image_bytes(1000, "JPEG"))
    assert item.components[1].metadata["caption"] == "photo 1000"
    assert item.gold_answer == "Follow step one. Then stir 0." and item.metadata["provenance"] == ["0"]


def test_mmdocrag_orders_quotes_by_page_and_layout_and_marks_gold_quotes(tmp_path, offline):
    items = {it.raw_id: it for it in mmdocrag.MMDocRAG(path=str(fx.mmdocrag(tmp_path / "md"))).load_all()}
    assert "0" not in items  # no image quotes
    item = items["3"]
    assert [c.id for c in item.components] == ["text1", "image1", "text2", "image2", "text3"]
    assert [c.kind for c in item.components] == [T, IMG, T, IMG, T]
    assert {c.id for c in item.components if c.metadata["supporting"]} == {"image1", "text2"}
    assert item.components[1].image.sha256 == sha(fx.image_bytes(3 * 7 + 1, "JPEG"))
    assert item.gold_answer == "Revenue 3"


def test_mmdocrag_names_the_item_and_file_when_an_image_is_missing(tmp_path, offline):
    root = fx.mmdocrag(tmp_path / "md")
    (root / "images.zip").unlink()
    with pytest.raises(ItemError, match=r"item mmdocrag::\d+: image file 'images/doc\d+_\d\.jpg' not found"):
        mmdocrag.MMDocRAG(path=str(root)).load()


def test_mmqa_shows_texts_then_titled_images_and_skips_table_questions(tmp_path, offline):
    items = {it.raw_id: it for it in mmqa.MMQA(path=str(fx.mmqa(tmp_path / "qa"))).load_all()}
    assert f"{2:032x}" not in items  # needs a table
    item = items[f"{4:032x}"]
    assert [c.id for c in item.components] == ["t_t12", "t_t13", "t_t14", "i_i8", "i_i9"]
    assert [c.title for c in item.components][-2:] == ["Pic 8", "Pic 9"]
    assert {c.id for c in item.components if c.metadata["supporting"]} == {"t_t13", "i_i8"}
    assert item.components[3].image.sha256 == sha(fx.image_bytes(8, "JPEG"))
    assert item.gold == "Item 4"


# --------------------------------------------------------------------------- side by side with the reference
# (our loader, edge fixture, the reference's profile). The target (60) covers every row, so every edge row passes
# through both filters; the reference reads the files itself (no hub rows).
SIDE_BY_SIDE = {
    "mmqa": (mmqa.MMQA, efx.mmqa_edge, "mmqa"),
    "mmdocrag": (mmdocrag.MMDocRAG, efx.mmdocrag_edge, "mmdocrag"),
    "mramg": (mramg.MRAMG, efx.mramg_edge, "mramg"),
}
TARGET = 60


def unholdable(case: str, entry: list) -> str | None:
    """Why an item the reference gives cannot be one of ours (skipped and counted), from what it shows."""
    _, question, parts = entry[:3]
    texts = [p for p in parts if not p.startswith("sha256:")]
    if not question.strip():
        return "the question is empty"
    if case == "mmqa" and not texts:
        return "no text (mixed_modality_order needs text and images; the reference shows the images alone)"
    if "" in texts:
        return {"mmqa": "a text is only spaces (the reference shows it empty)",
                "mmdocrag": "a text quote is empty (the reference shows it empty)"}[case]
    return None


@pytest.mark.parametrize("case", sorted(SIDE_BY_SIDE))
def test_reference_sampling_equals_the_references_own_loader_on_edge_rows(case, reference_src, tmp_path,  # noqa: F811
                                                                         offline):
    """ids, order, question, components (texts byte for byte, images by their bytes, in order), gold as stored
    and the K=6 orderings, item by item; what the reference keeps that no item can hold, and a repeated id's
    later rows, are skipped and counted."""
    loader_cls, build, name = SIDE_BY_SIDE[case]
    root = build(tmp_path / "data")
    profile = dict(name=name, hf_repo="-", split="file-backed", facets=["mixed_modality_order"])
    reference = efx.reference_detail(reference_src, tmp_path, profile, TARGET, [], root, raw_gold=True)
    loader = loader_cls(path=str(root), n=TARGET, sampling="reference", cache=False)
    ours = efx.our_detail(loader.load(), "mixed_modality_order")
    reasons = {e[0]: r for e in reference if (r := unholdable(case, e))}
    expected = efx.holdable(reference, reasons)
    assert len(expected) >= 15 and len(expected) < len(reference) and reasons  # not vacuous; edge rows reached
    assert [r[0] for r in ours] == [r[0] for r in expected]
    for mine, theirs in zip(ours, expected, strict=True):
        assert mine == theirs
    assert loader.skipped == efx.skip_counts(reference, reasons)


@pytest.mark.parametrize(("case", "skipped"), [
    ("mmqa", {"a text document is empty": 2, REPEATED_ID: 1, "the question is empty": 1}),
    ("mmdocrag", {REPEATED_ID: 1, "the question is empty": 1}),
    ("mramg", {REPEATED_ID: 1, "the answer is empty": 1, "the question is empty": 1}),
])
def test_an_edge_row_is_skipped_and_counted_under_stable_sampling(case, skipped, tmp_path, offline):
    """Our own draw on the same edge rows: a row no item can hold (an empty question, answer or text document)
    is left out and counted, never an error that stops the load."""
    loader_cls, build, _ = SIDE_BY_SIDE[case]
    loader = loader_cls(path=str(build(tmp_path / "data")), n=TARGET, cache=False, allow_partial=True)
    items = loader.load()
    assert len(items) >= 15 and len({it.item_id for it in items}) == len(items)
    assert loader.skipped == skipped


def test_reference_sampling_without_the_archive_the_reference_reads_names_it(tmp_path, offline):
    """The reference reads MMQA's images from `mmqa_images.zip` (upstream's `final_dataset_images.zip`, renamed):
    without either, one message naming both and where to put them, not an error per image."""
    root = efx.mmqa_edge(tmp_path / "data")
    for name in mmqa.REFERENCE_ARCHIVES:
        (root / name).unlink()
    with pytest.raises(DatasetUnavailable, match=r"mmqa_images\.zip or final_dataset_images\.zip.* into "):
        mmqa.MMQA(path=str(root), n=5, sampling="reference", cache=False).load()
