"""The facets' rendering contract: display order, display-slot labels, images at their slots, the
question in one place, option letters that map back, and the answer instruction of the mode."""

from __future__ import annotations

import re

import pytest
from facet_test_helpers import comp, png

from facet_probe.core.items import make_item
from facet_probe.core.prompts import AnswerFormat, ImagePart, PromptMode, TextPart
from facet_probe.facets import FACETS, MAIN_FACETS, OptionOrder
from facet_probe.facets import prompts as P
from facet_probe.facets.layout import ANSWER_FORMATS

ALL = list(FACETS)
PERMS = [(0, 1, 2, 3), (2, 0, 3, 1), (3, 2, 1, 0), (1, 3, 0, 2)]


def full_text(prompt) -> str:
    """All messages' text, images as <img>, messages separated by a marker."""
    return "\n<msg>\n".join(
        "".join(p.text if isinstance(p, TextPart) else "<img>" for p in m.parts) for m in prompt.messages)


def source_positions(text: str, n: int) -> list[int]:
    """Source indices in the order their ``src{i}`` markers appear in the text."""
    return [int(m) for m in re.findall(r"src(\d)", text)][: n]


def test_every_config_target_names_its_class():
    import importlib
    from pathlib import Path

    import yaml

    conf = Path(importlib.import_module("facet_probe").__file__).parent / "conf" / "facet"
    for path in sorted(conf.glob("*.yaml")):
        target = yaml.safe_load(path.read_text())["_target_"]
        module, cls = target.rsplit(".", 1)
        facet_cls = getattr(importlib.import_module(module), cls)
        assert facet_cls.name == path.stem == module.rsplit(".", 1)[1]
        assert FACETS[facet_cls.name] is facet_cls
    assert set(FACETS) == {p.stem for p in conf.glob("*.yaml")}
    assert MAIN_FACETS == ("option_order", "evidence_chunk_order", "document_rank_order",
                           "image_set_order", "mixed_modality_order")


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("perm", PERMS)
def test_components_appear_in_display_order(items, name, perm):
    item = items[name]
    prompt = FACETS[name]().render(item, perm)
    assert source_positions(full_text(prompt), 4) == list(perm)


@pytest.mark.parametrize("name", ALL)
def test_displayed_follows_permutation(items, name):
    facet = FACETS[name]()
    comps = facet.orderables(items[name])
    assert [c.id for c in facet.displayed(items[name], (2, 0, 3, 1))] == [comps[i].id for i in (2, 0, 3, 1)]


@pytest.mark.parametrize(("name", "label"), [
    ("evidence_chunk_order", "Chunk {n}: src{i} fact"),
    ("document_rank_order", "Document {n}: Title {i}\nsrc{i} body"),
    ("few_shot_order", "Example {n}:\nQuestion: src{i} plural"),
    ("tool_description_order", "Tool {n}: tool_{i}\nsrc{i} does"),
])
def test_labels_follow_display_slots_not_source_positions(items, name, label):
    perm = (2, 0, 3, 1)
    text = full_text(FACETS[name]().render(items[name], perm))
    for slot, src in enumerate(perm):
        assert label.format(n=slot + 1, i=src) in text
    # no canonical leak: "... 1" is source 2's, never source 0's
    assert label.format(n=1, i=0) not in text


def test_document_titles_printed_once_even_when_the_body_repeats_them():
    item = make_item(item_id="t::dup", dataset="t", question="q?", answer_type="free", gold_answer="a",
                     components=(comp("d0", "document", "Alpha\nAlpha is a letter.", title="Alpha"),
                                 comp("d1", "document", "Beta is a letter too.", title="Beta")))
    text = full_text(FACETS["document_rank_order"]().render(item, (1, 0)))
    assert text.count("Alpha") == 2  # the heading and the body sentence, not a repeated title line
    assert "Document 1: Beta\nBeta is a letter too.\n\nDocument 2: Alpha\nAlpha is a letter." in text
    assert text.startswith(P.DOCUMENTS_HEADER)


@pytest.mark.parametrize("perm", PERMS)
def test_images_are_interleaved_at_their_slots(items, perm):
    item = items["image_set_order"]
    prompt = FACETS["image_set_order"]().render(item, perm)
    parts = prompt.messages[-1].parts
    images = [p for p in parts if isinstance(p, ImagePart)]
    assert [p.image.sha256 for p in images] == [item.components[i].image.sha256 for i in perm]
    assert prompt.images() == [p.image for p in images]
    for slot, src in enumerate(perm):
        k = next(j for j, p in enumerate(parts) if isinstance(p, ImagePart) and p is images[slot])
        before, after = parts[k - 1], parts[k + 1]
        assert isinstance(before, TextPart) and before.text.endswith(f"Image {slot + 1}:")
        assert isinstance(after, TextPart) and after.text.startswith(f"\nsrc{src} caption")


def test_mixed_modality_labels_count_within_kind_by_display_slot(items):
    item = items["mixed_modality_order"]
    prompt = FACETS["mixed_modality_order"]().render(item, (3, 2, 1, 0))
    text = full_text(prompt)
    assert re.findall(r"(Chunk \d|Image \d):(?:<img>\n| )(src\d)", text) == [
        ("Image 1", "src3"), ("Chunk 1", "src2"), ("Image 2", "src1"), ("Chunk 2", "src0")]
    assert [i.sha256 for i in prompt.images()] == [item.components[3].image.sha256,
                                                   item.components[1].image.sha256]


def test_fixed_context_comes_first_and_is_never_permuted():
    fig = png("red")
    item = make_item(item_id="t::fig", dataset="t", question="Which shape?", fixed=(comp("f", "image", image=fig),),
                     choices=("circle", "square", "star"), gold_index=0)
    for perm in [(0, 1, 2), (2, 1, 0)]:
        parts = OptionOrder().render(item, perm).messages[0].parts
        assert parts[0] == TextPart("Figure:") and parts[1] == ImagePart(fig)
        assert parts[2].text.startswith("\n\nQuestion: Which shape?\n")


def test_several_fixed_images_are_numbered_and_kept_in_source_order():
    figs = (png("red"), png("blue"))
    item = make_item(item_id="t::figs", dataset="t", question="q?", choices=("a", "b"), gold_index=0,
                     fixed=(comp("f0", "image", image=figs[0]), comp("f1", "image", "A caption.", image=figs[1])))
    prompt = OptionOrder().render(item, (1, 0))
    assert prompt.images() == list(figs)
    assert "Figure 1:<img>\n\nFigure 2:<img>\nA caption." in full_text(prompt)


def test_components_the_facet_does_not_order_stay_in_source_order(items):
    item = make_item(item_id="t::ctx", dataset="t", question="q?", choices=("a", "b"), gold_index=0,
                     components=(comp("c0", "text_chunk", "first"), comp("c1", "text_chunk", "second"),
                                 comp("i0", "image", image=png("red")), comp("i1", "image", image=png("blue"))))
    text = full_text(FACETS["image_set_order"]().render(item, (1, 0)))
    assert text.startswith("Chunk 1: first\n\nChunk 2: second\n\nImage 1:<img>\n\nImage 2:<img>")
    prompt = FACETS["image_set_order"]().render(item, (1, 0))
    assert [i.sha256 for i in prompt.images()] == [item.components[3].image.sha256,
                                                   item.components[2].image.sha256]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("mode", list(PromptMode))
def test_question_options_and_instruction_close_the_last_user_message(items, name, mode):
    item = items[name]
    facet = FACETS[name]()
    prompt = facet.render(item, (3, 1, 0, 2), mode)
    last = prompt.messages[-1]
    assert last.role == "user"
    fmt = ANSWER_FORMATS[item.answer_type]
    order = facet.choice_order(item, (3, 1, 0, 2))
    options = "".join(f"\n{P.OPTION_LETTERS[j]}. {item.choices[i]}" for j, i in enumerate(order))
    tail = f"Question: {item.question}{options}\n\n{P.answer_instruction(mode, fmt)}"
    assert isinstance(last.parts[-1], TextPart)
    text = last.parts[-1].text
    assert text == tail or text.endswith("\n\n" + tail)
    assert full_text(prompt).count(tail) == 1
    assert prompt.mode == mode and prompt.answer_format == fmt
    assert prompt.system == facet.system  # the facet's own (prompts.SYSTEM_PROMPT unless it says otherwise)


@pytest.mark.parametrize("perm", PERMS)
def test_option_order_letters_map_back_through_choice_order(items, perm):
    item = items["option_order"]
    facet = FACETS["option_order"]()
    prompt = facet.render(item, perm)
    assert facet.choice_order(item, perm) == perm
    assert [c.id for c in facet.orderables(item)] == ["choice0", "choice1", "choice2", "choice3"]
    shown = dict(re.findall(r"^([A-D])\. (.+)$", full_text(prompt), flags=re.M))
    assert prompt.labels == ("A", "B", "C", "D")
    for slot, letter in enumerate(prompt.labels):
        assert shown[letter] == item.choices[facet.choice_order(item, perm)[slot]]
    gold_letter = prompt.labels[perm.index(item.gold_index)]
    assert shown[gold_letter] == item.gold


@pytest.mark.parametrize("name", [n for n in ALL if n not in ("option_order", "tool_description_order")])
def test_other_facets_keep_options_in_source_order(name, items):
    mcq = make_item(item_id="t::keep", dataset="t", question="q?", choices=("x0", "x1", "x2"), gold_index=1,
                    components=items[name].components)
    facet = FACETS[name]()
    prompt = facet.render(mcq, (3, 2, 1, 0))
    assert facet.choice_order(mcq, (3, 2, 1, 0)) == (0, 1, 2)
    assert "Question: q?\nA. x0\nB. x1\nC. x2\n\n" in full_text(prompt)
    assert prompt.labels == ("A", "B", "C")


@pytest.mark.parametrize(("name", "fmt"), [("evidence_chunk_order", AnswerFormat.FREE),
                                           ("tool_description_order", AnswerFormat.TOOL),
                                           ("image_set_order", AnswerFormat.LETTER)])
def test_answer_format_and_labels_follow_the_answer_type(items, name, fmt):
    prompt = FACETS[name]().render(items[name], (0, 1, 2, 3))
    assert prompt.answer_format == fmt
    assert prompt.labels == (("A", "B") if fmt == AnswerFormat.LETTER else ())


def test_direct_and_cot_instructions_differ_and_match_the_answer_forms(items):
    facet = FACETS["evidence_chunk_order"]()
    direct = facet.render(items["evidence_chunk_order"], (0, 1, 2, 3), PromptMode.DIRECT)
    cot = facet.render(items["evidence_chunk_order"], (0, 1, 2, 3), "cot")
    assert full_text(direct).endswith(P.DIRECT_INSTRUCTIONS[AnswerFormat.FREE])
    assert full_text(cot).endswith(P.COT_INSTRUCTIONS[AnswerFormat.FREE])
    assert '"Answer: X"' in P.DIRECT_INSTRUCTIONS[AnswerFormat.FREE]
    assert '"The answer is (X)."' in P.COT_INSTRUCTIONS[AnswerFormat.FREE]
    assert "one or two sentences" in P.COT_INSTRUCTIONS[AnswerFormat.LETTER]
    assert direct.hash != cot.hash
    assert full_text(direct)[: -len(P.DIRECT_INSTRUCTIONS[AnswerFormat.FREE])] == \
        full_text(cot)[: -len(P.COT_INSTRUCTIONS[AnswerFormat.FREE])]


def test_format_answer_writes_the_instructed_forms():
    assert P.format_answer("direct", "B") == "Answer: B"
    assert P.format_answer(PromptMode.COT, "B", "Only B fits the figure.") == \
        "Only B fits the figure. The answer is (B)."
    assert P.format_answer("cot", "get_time") == "The answer is (get_time)."
    for fmt in AnswerFormat:
        assert P.answer_instruction("direct", fmt) == P.DIRECT_INSTRUCTIONS[fmt]
        assert P.answer_instruction("cot", fmt) == P.COT_INSTRUCTIONS[fmt]


def test_bad_permutations_are_rejected(items):
    for name in ALL:
        facet = FACETS[name]()
        for bad in [(0, 1, 2), (0, 1, 2, 2), (0, 1, 2, 4), (0, 1, 2, 3, 4)]:
            with pytest.raises(ValueError, match="not a permutation"):
                facet.render(items[name], bad)


def test_manifest_component_ids_are_the_displayed_components(items):
    from facet_probe.audit.manifest import build_manifest

    for name in ALL:
        facet = FACETS[name]()
        for row in build_manifest([items[name]], facet, k=6, seed=42):
            assert row.component_ids == tuple(c.id for c in facet.displayed(items[name], row.permutation))
            assert source_positions(full_text(facet.render(items[name], row.permutation)), 4) == \
                list(row.permutation)
