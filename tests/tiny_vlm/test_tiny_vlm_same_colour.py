"""The two-step picture task: one answer, found only through the named shape's colour, stated by the rationale."""

from __future__ import annotations

from collections import Counter

from facet_probe.core.prompts import PromptMode
from facet_probe_dev.tiny_vlm import same_colour
from facet_probe_dev.tiny_vlm.data import facet, load_items, set_facets, target_text
from facet_probe_dev.tiny_vlm.questions import questions, recognised


def test_every_picture_has_two_colours_on_two_shapes_each_and_one_gold():
    for item in load_items(same_colour.NAME, "train", 40):
        scene = item.fixed[0].metadata["scene"]
        assert sorted(Counter(o["colour"] for o in scene).values()) == [2, 2]
        named = item.question.removeprefix("Which shape has the same colour as the ").removesuffix("?")
        assert named not in item.choices and len(set(item.choices)) == 4
        colour = {o["shape"]: o["colour"] for o in scene}
        assert [c for c in item.choices if colour.get(c) == colour[named]] == [item.gold]


def test_the_rationale_names_both_steps_and_siblings_are_recognised():
    item = load_items(same_colour.NAME, "test", 1)[0]
    assert recognised(item) and set_facets(same_colour.NAME) == ("option_order",)
    scene = {o["shape"]: o["colour"] for o in item.fixed[0].metadata["scene"]}
    named = item.question.split(" as the ")[1].rstrip("?")
    reply = target_text(item, facet("option_order"), (0, 1, 2, 3), PromptMode.COT)
    assert reply.startswith(f"The figure shows a{'n' if scene[named][0] in 'aeiou' else ''} {scene[named]} {named}")
    assert f"{scene[item.gold]} {item.gold}." in reply
    assert all(q.gold in item.choices for q in questions(item))


def test_the_splits_are_separate_streams_and_prefix_stable():
    train, test = load_items(same_colour.NAME, "train", 5), load_items(same_colour.NAME, "test", 5)
    assert [i.question for i in load_items(same_colour.NAME, "train", 3)] == [i.question for i in train[:3]]
    assert [i.fixed[0].metadata["scene"] for i in train] != [i.fixed[0].metadata["scene"] for i in test]


def test_the_owner_variant_adds_a_text_step_and_its_options_do_not_name_the_shape():
    items = load_items(same_colour.OWNER_NAME, "train", 40)
    asked_first = 0
    for item in items:
        held = item.metadata["owners"]
        who = item.question.split(" as ")[1].removesuffix("'s shape?")
        named = held[who]
        assert sorted(item.choices) == sorted(o["shape"] for o in item.fixed[0].metadata["scene"])
        assert item.gold == same_colour.partner(list(item.fixed[0].metadata["scene"]), named)["shape"]
        assert recognised(item) and questions(item)[0].rationale.startswith(f"{who} has the {named}.")
        asked_first += list(held).index(who) == 0
    assert 10 < asked_first < 30  # the asked person is not always in the same place
