"""Success criteria per attack, and which samples are selected for attack (with the reason recorded)."""

from __future__ import annotations

import pytest

from facet_probe.attack.criteria import rationale_changed, read_reply
from facet_probe.attack.objectives import AnswerObjective, RationaleObjective, StopReasoningObjective
from facet_probe.attack.selection import select
from facet_probe.core.prompts import PromptMode

LABELS = ("A", "B", "C", "D")
COT = PromptMode.COT


@pytest.mark.parametrize(("reply", "answer", "rationale", "stop"), [
    ("It is red. The answer is (B).", False, False, False),  # still correct
    ("It is blue. The answer is (C).", True, True, False),  # wrong, but reasons first
    ("The answer is (C).", True, True, True),  # wrong and answered at once
    ("The answer is (C). It is blue.", True, True, True),
    ("The answer is (B).", False, False, False),  # answered at once but correct
    ("I am not sure.", True, True, False),  # no answer: not correct; no answer given first either
])
def test_success_criteria(reply, answer, rationale, stop):
    reading = read_reply(reply, LABELS, "B", COT)
    assert AnswerObjective().success(reading) is answer
    assert RationaleObjective().success(reading) is rationale
    assert StopReasoningObjective().success(reading) is stop


def test_a_reading_has_the_rationale_before_the_answer_sentence():
    r = read_reply("  It is red,\nso round. The answer is (B).", LABELS, "B", COT)
    assert (r.answer, r.correct, r.rationale, r.answer_first, r.parse_status) == (
        "B", True, "It is red,\nso round.", False, "ok")
    assert rationale_changed(r, read_reply("It is  RED, so round. The answer is (C).", LABELS, "B", COT)) is False
    assert rationale_changed(r, read_reply("It is blue. The answer is (C).", LABELS, "B", COT)) is True


@pytest.mark.parametrize(("reply", "mode", "has_image", "selected", "reason"), [
    ("It is red. The answer is (B).", COT, True, True, "correct"),
    ("The answer is (B).", COT, True, False, "no_rationale"),
    ("Answer: B", PromptMode.DIRECT, True, True, "correct"),
    ("It is red. The answer is (A).", COT, True, False, "wrong_answer"),
    ("Hmm.", COT, True, False, "no_answer"),
    ("It is red. The answer is (B).", COT, False, False, "no_image"),
])
def test_only_correct_replies_with_a_rationale_are_attacked(reply, mode, has_image, selected, reason):
    sel = select(read_reply(reply, LABELS, "B", mode), mode, has_image=has_image)
    assert (sel.selected, sel.reason) == (selected, reason)
