"""Items: construction, image digests, and validation messages that say what and where."""

from __future__ import annotations

import hashlib
import re
import struct
import zlib

import numpy as np
import pytest

from facet_probe.core.items import (
    AnswerType,
    Component,
    ComponentKind,
    ImageRef,
    ItemError,
    check_images,
    check_unique_ids,
    make_item,
    repeated_choices,
)


def mcq(**over):
    fields = dict(item_id="ds::1", dataset="ds", question="Which one?", choices=("red", "green", "blue"),
                  gold_index=1)
    return make_item(**{**fields, **over})


def chunk(cid: str, text: str = "Some text.") -> dict:
    return {"id": cid, "kind": "text_chunk", "text": text}


def test_a_valid_mcq_item():
    item = mcq(components=(chunk("c0"), chunk("c1")))
    assert (item.gold, item.raw_id, item.answer_type) == ("green", "1", AnswerType.MCQ)
    assert [c.id for c in item.components_of(ComponentKind.TEXT_CHUNK)] == ["c0", "c1"]


def test_images_by_bytes_and_by_path_carry_their_sha256(tmp_path):
    data = b"\x89PNG fake bytes"
    path = tmp_path / "img.png"
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    assert ImageRef.from_bytes(data).sha256 == digest
    assert ImageRef.from_path(path).sha256 == digest
    assert ImageRef.from_path(path).to_json() == {"path": str(path), "sha256": digest}
    item = mcq(fixed=({"id": "fig", "kind": "image", "image": ImageRef.from_path(path)},))
    assert [im.sha256 for im in item.images()] == [digest]


@pytest.mark.parametrize(("over", "message"), [
    ({"question": "  "}, "question is empty"),
    ({"item_id": "other::1"}, "must look like 'ds::<raw id>'"),
    ({"item_id": "ds::"}, "must look like 'ds::<raw id>'"),
    ({"gold_index": 3}, "gold_index 3 is not among the 3 choices"),
    ({"gold_index": None}, "gold_index None is not among the 3 choices"),
    ({"choices": ("only",), "gold_index": 0}, "at least 2 choices"),
    ({"choices": ("a", " "), "gold_index": 0}, "a choice is empty"),
    ({"gold_answer": "blue"}, "gold_answer 'blue' is not the choice at gold_index 1"),
    ({"components": (chunk("c0"), chunk("c0"))}, r"duplicate component ids \['c0'\]"),
    ({"components": (chunk("c0", "   "),)}, "component 'c0' .* has empty text"),
    ({"components": ({"id": "t", "kind": "dialog_turn", "text": "hi", "role": "bot"},)},
     "role must be 'user' or 'assistant'"),
    ({"components": ({"id": "e", "kind": "few_shot", "text": "Q?"},)}, "needs an `answer`"),
    ({"components": ({"id": "i", "kind": "image"},)}, "an image component needs `image`"),
])
def test_invalid_items_name_the_item_and_the_problem(over, message):
    with pytest.raises(ItemError, match=f"invalid item {over.get('item_id', 'ds::1')}: .*{message}"):
        mcq(**over)


def test_a_missing_image_file_is_named(tmp_path):
    missing = tmp_path / "nope.png"
    with pytest.raises(ItemError, match=f"image file not found: {missing}"):
        mcq(fixed=({"id": "fig", "kind": "image", "image": {"path": str(missing)}},))
    with pytest.raises(ValueError, match="exactly one of `path` or `data`"):
        ImageRef()


def test_free_and_tool_items_need_their_gold():
    with pytest.raises(ItemError, match="free item needs a non-empty gold_answer"):
        make_item(item_id="ds::f", dataset="ds", question="Where?", answer_type="free")
    tools = ({"id": "t0", "kind": "tool", "text": "Gets time.", "title": "get_time"},
             {"id": "t1", "kind": "tool", "text": "Gets weather.", "title": "get_weather"})
    item = make_item(item_id="ds::t", dataset="ds", question="Time?", answer_type="tool",
                     gold_answer="get_time", components=tools)
    assert item.gold == "get_time"
    with pytest.raises(ItemError, match=r"gold tool 'get_date' is not among the tools \['get_time', 'get_weather'\]"):
        make_item(item_id="ds::t", dataset="ds", question="Time?", answer_type="tool", gold_answer="get_date",
                  components=tools)


def test_duplicate_item_ids_are_refused():
    with pytest.raises(ItemError, match="duplicate item id 'ds::1'"):
        check_unique_ids([mcq(), mcq()])
    check_unique_ids([mcq(), mcq(item_id="ds::2")])


def test_items_and_components_are_immutable():
    item = mcq()
    with pytest.raises(Exception, match="frozen"):
        item.question = "changed"
    comp = Component(id="c", kind="text_chunk", text="x")
    with pytest.raises(Exception, match="frozen"):
        comp.text = "y"


def test_an_item_drawn_as_the_reference_keeps_its_id_when_read_back():
    """dataset.sampling=reference gives items the reference's ids (`commonsenseqa::<id>` for our
    `commonsense_qa`) and keeps ours in metadata; items.jsonl must read back (rescoring, the explorer)."""
    item = mcq(item_id="other::1", metadata={"stable_item_id": "ds::1"})
    assert type(item).model_validate(item.model_dump(mode="json")).item_id == "other::1"
    with pytest.raises(ValueError, match="must look like 'ds::<raw id>'"):
        mcq(item_id="other::1", metadata={"stable_item_id": "elsewhere::1"})
    with pytest.raises(ValueError, match="must look like '<dataset name>::<raw id>'"):
        mcq(item_id="other::", metadata={"stable_item_id": "ds::1"})


@pytest.mark.parametrize(("gold_index", "shown"), [(True, "true (a boolean)"), (False, "false (a boolean)"),
                                                   (1.0, "1.0 (float)"), ("1", '"1" (str)')])
def test_an_index_is_a_whole_number_never_a_coerced_bool_float_or_string(gold_index, shown):
    """Pydantic's lax mode read `gold_index: true` as 1 (and 1.0 or "1" likewise) without a word."""
    with pytest.raises(ItemError, match=f"invalid item ds::1: gold_index: .*got {re.escape(shown)}; write the index"):
        mcq(gold_index=gold_index)


def test_an_index_from_numpy_or_json_is_still_an_index():
    assert mcq(gold_index=np.int64(2)).gold == "blue"  # loaders reading Parquet give numpy integers
    assert type(mcq()).model_validate_json(mcq().model_dump_json()).gold_index == 1


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height pixels (its data is a few bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 10))
            + chunk(b"IEND", b""))


def test_an_image_claiming_more_pixels_than_pillow_decodes_is_one_message(tmp_path):
    """Pillow raises DecompressionBombError (not an OSError) on opening: the image check named no item."""
    (tmp_path / "big.png").write_bytes(png_claiming(40000, 40000))
    item = mcq(fixed=({"id": "scan", "kind": "image", "image": {"path": str(tmp_path / "big.png")}},))
    with pytest.raises(ItemError) as refused:
        check_images([mcq(item_id="ds::0"), item])
    message = str(refused.value)
    assert message.startswith(f"item ds::1, component 'scan' (its image): {tmp_path / 'big.png'} is too large")
    assert "1,600,000,000 pixels" in message and "resize the image" in message


def test_repeated_choices_are_found_by_their_text():
    assert repeated_choices(mcq(choices=("same", "same ", "other"), gold_index=2)) == {"same": [0, 1]}
    assert repeated_choices(mcq(choices=("Same", "same"), gold_index=0)) == {}  # case can matter (x and X)
    assert repeated_choices(mcq()) == {}
