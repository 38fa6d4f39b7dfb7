"""Items a facet cannot order are refused, before rendering, with a one-line reason."""

from __future__ import annotations

import pytest
from facet_test_helpers import comp, png

from facet_probe.core.items import make_item
from facet_probe.facets import FACETS, UnsupportedItem

TEXT_MCQ = make_item(item_id="t::text", dataset="t", question="q?", choices=("a", "b"), gold_index=0,
                     components=(comp("c0", "text_chunk", "one"), comp("c1", "text_chunk", "two")))
FREE = make_item(item_id="t::free", dataset="t", question="q?", answer_type="free", gold_answer="x",
                 components=(comp("c0", "text_chunk", "one"), comp("c1", "text_chunk", "two")))
ONE_IMAGE = make_item(item_id="t::one", dataset="t", question="q?", choices=("a", "b"), gold_index=0,
                      components=(comp("i0", "image", image=png("red")), comp("c0", "text_chunk", "one")))
IMAGES_ONLY = make_item(item_id="t::imgs", dataset="t", question="q?", choices=("a", "b"), gold_index=0,
                        components=(comp("i0", "image", image=png("red")), comp("i1", "image", image=png("blue"))))
NAMELESS_TOOL = make_item(item_id="t::tools", dataset="t", question="q?", answer_type="tool", gold_answer="f",
                          components=(comp("f0", "tool", "does f", title="f"), comp("f1", "tool", "no name")))
TWIN_TOOLS = make_item(item_id="t::twins", dataset="t", question="q?", answer_type="tool", gold_answer="f",
                       components=(comp("f0", "tool", "does f", title="f"), comp("f1", "tool", "also f", title="f")))
ASSISTANT_IMAGE = make_item(item_id="t::aimg", dataset="t", question="q?", answer_type="free", gold_answer="x",
                            components=(comp("u0", "dialog_turn", "hi", role="user"),
                                        comp("a0", "dialog_turn", "look", role="assistant", image=png("red"))))

CASES = [
    ("image_set_order", TEXT_MCQ, "image_set_order orders image components; item t::text has none"),
    ("image_set_order", ONE_IMAGE, "image_set_order orders image components; item t::one has only 1 (needs at least 2)"),
    ("option_order", FREE, "option_order permutes the options of a multiple-choice item; item t::free is free (no options)"),
    ("mixed_modality_order", TEXT_MCQ, "mixed_modality_order needs both text and image components; item t::text has 2 text and 0 image"),
    ("mixed_modality_order", IMAGES_ONLY, "mixed_modality_order needs both text and image components; item t::imgs has 0 text and 2 image"),
    ("evidence_chunk_order", IMAGES_ONLY, "evidence_chunk_order orders text chunk components; item t::imgs has none"),
    ("document_rank_order", TEXT_MCQ, "document_rank_order orders document components; item t::text has none"),
    ("dialog_turn_order", TEXT_MCQ, "dialog_turn_order orders dialog turns; item t::text has none"),
    ("dialog_turn_order", ASSISTANT_IMAGE, "dialog_turn_order: assistant turn 'a0' of item t::aimg carries an image; providers accept images only in user turns"),
    ("few_shot_order", TEXT_MCQ, "few_shot_order orders few-shot demonstrations; item t::text has none"),
    ("tool_description_order", TEXT_MCQ, "tool_description_order needs a tool item (answer = a function name); item t::text is mcq"),
    ("tool_description_order", TWIN_TOOLS, "tool_description_order: item t::twins has duplicate tool names ['f']"),
    ("tool_description_order", NAMELESS_TOOL, "tool_description_order: item t::tools has a tool without a name (title)"),
]


@pytest.mark.parametrize(("name", "item", "reason"), CASES)
def test_unsupported_items_raise_with_a_clear_reason(name, item, reason):
    facet = FACETS[name]()
    assert facet.unsupported_reason(item) == reason
    assert "\n" not in reason
    with pytest.raises(UnsupportedItem) as err:
        facet.render(item, (0, 1))
    assert str(err.value) == reason
    with pytest.raises(UnsupportedItem):
        facet.check(item)


def test_supported_items_have_no_reason(items):
    for name, item in items.items():
        assert FACETS[name]().unsupported_reason(item) is None
    assert FACETS["image_set_order"]().unsupported_reason(IMAGES_ONLY) is None
    assert FACETS["mixed_modality_order"]().unsupported_reason(ONE_IMAGE) is None
