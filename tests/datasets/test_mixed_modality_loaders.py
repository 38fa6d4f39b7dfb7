"""Mixed-modality datasets: MRAMG recipes, MMDocRAG quotes and MultiModalQA contexts."""

from __future__ import annotations

import hashlib

import pytest
import upstream_fixtures as fx

from facet_probe.datasets import mmdocrag, mmqa, mramg
from facet_probe.items import ComponentKind, ItemError

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
