"""dialog_turn_order renders real chat turns: roles kept, same-role neighbours merged, user first,
the question in the final user message."""

from __future__ import annotations

import itertools

import pytest
from facet_test_helpers import comp, png

from facet_probe.core.items import make_item
from facet_probe.core.prompts import ImagePart, TextPart
from facet_probe.facets import DialogTurnOrder
from facet_probe.facets import prompts as P

TAIL = f"Question: What does Ann like?\n\n{P.DIRECT_INSTRUCTIONS['free']}"


def roles_and_texts(prompt):
    return [(m.role, m.text()) for m in prompt.messages]


def test_identity_alternates_and_appends_the_question_as_a_new_user_message(items):
    prompt = DialogTurnOrder().render(items["dialog_turn_order"], (0, 1, 2, 3))
    assert roles_and_texts(prompt) == [
        ("user", "src0 Ann likes tea."), ("assistant", "src1 Noted."),
        ("user", "src2 Bob likes coffee."), ("assistant", "src3 Got it."), ("user", TAIL)]
    assert prompt.system == P.DIALOG_SYSTEM_PROMPT


def test_consecutive_same_role_turns_are_merged_with_a_blank_line(items):
    prompt = DialogTurnOrder().render(items["dialog_turn_order"], (0, 2, 1, 3))
    assert roles_and_texts(prompt) == [
        ("user", "src0 Ann likes tea.\n\nsrc2 Bob likes coffee."),
        ("assistant", "src1 Noted.\n\nsrc3 Got it."), ("user", TAIL)]


def test_a_last_user_turn_carries_the_question(items):
    prompt = DialogTurnOrder().render(items["dialog_turn_order"], (1, 0, 3, 2))
    assert roles_and_texts(prompt) == [
        ("user", P.DIALOG_OPENING), ("assistant", "src1 Noted."), ("user", "src0 Ann likes tea."),
        ("assistant", "src3 Got it."), ("user", f"src2 Bob likes coffee.\n\n{TAIL}")]


def test_an_assistant_first_order_gets_the_fixed_opening(items):
    prompt = DialogTurnOrder().render(items["dialog_turn_order"], (1, 3, 0, 2))
    assert roles_and_texts(prompt) == [
        ("user", P.DIALOG_OPENING), ("assistant", "src1 Noted.\n\nsrc3 Got it."),
        ("user", f"src0 Ann likes tea.\n\nsrc2 Bob likes coffee.\n\n{TAIL}")]


@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))))
def test_every_order_alternates_roles_starting_and_ending_with_the_user(items, perm):
    prompt = DialogTurnOrder().render(items["dialog_turn_order"], perm)
    roles = [m.role for m in prompt.messages]
    assert roles[0] == "user" and roles[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert prompt.messages[-1].text().endswith(TAIL)
    text = "\n".join(m.text() for m in prompt.messages)
    assert [text.index(f"src{i}") for i in perm] == sorted(text.index(f"src{i}") for i in perm)


def test_fixed_context_opens_the_first_user_message_and_user_turn_images_stay_in_place():
    fig, pic = png("red"), png("blue")
    item = make_item(item_id="t::dimg", dataset="t", question="What colour?", answer_type="free", gold_answer="blue",
                     fixed=(comp("f", "image", image=fig),),
                     components=(comp("u0", "dialog_turn", "Here is my photo.", role="user", image=pic),
                                 comp("a0", "dialog_turn", "Nice photo.", role="assistant")))
    p1 = DialogTurnOrder().render(item, (0, 1))
    assert [m.role for m in p1.messages] == ["user", "assistant", "user"]
    assert p1.messages[0].parts == (TextPart("Figure:"), ImagePart(fig), ImagePart(pic),
                                    TextPart("\nHere is my photo."))
    p2 = DialogTurnOrder().render(item, (1, 0))
    assert [m.role for m in p2.messages] == ["user", "assistant", "user"]
    assert p2.messages[0].parts == (TextPart("Figure:"), ImagePart(fig))  # no opening needed
    assert p2.messages[2].parts[0] == ImagePart(pic)
    assert p2.images() == p1.images() == [fig, pic]


def test_the_options_of_an_mcq_dialog_follow_the_question(items):
    item = make_item(item_id="t::dmcq", dataset="t", question="Who likes tea?", choices=("Ann", "Bob"),
                     gold_index=0, components=items["dialog_turn_order"].components)
    prompt = DialogTurnOrder().render(item, (3, 2, 1, 0), "cot")
    assert prompt.messages[-1].text().endswith(
        f"Question: Who likes tea?\nA. Ann\nB. Bob\n\n{P.COT_INSTRUCTIONS['letter']}")
    assert prompt.labels == ("A", "B")
