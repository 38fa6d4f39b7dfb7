"""Items: construction, image digests, and validation messages that say what and where."""

from __future__ import annotations

import hashlib

import pytest

from facet_probe.items import (
    AnswerType,
    Component,
    ComponentKind,
    ImageRef,
    ItemError,
    check_unique_ids,
    make_item,
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
