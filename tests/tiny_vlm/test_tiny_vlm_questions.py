"""Sibling questions: every question an item's evidence answers, with a correct gold and a short rationale."""

from __future__ import annotations

import re

import pytest

from facet_probe.core.items import AnswerType, Item
from facet_probe.datasets.synthetic.vocab import CATEGORIES
from facet_probe_dev.tiny_vlm import echo
from facet_probe_dev.tiny_vlm.data import AUXILIARY_TASKS, available_sets, load_items
from facet_probe_dev.tiny_vlm.questions import ENUMERATORS, questions, rationale, recognised, sibling

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)


@pytest.fixture(scope="module")
def items() -> dict[tuple[str, str], list[Item]]:
    """The first 50 items of both splits of every set (the audit's test items included)."""
    return {(name, split): load_items(name, split, 50) for name in available_sets() for split in ("train", "test")}


def _strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in _strings(v)]
    return []


def _evidence(item: Item) -> list[str]:
    """Everything the evidence shows: component texts, titles, demo answers, drawn-object metadata."""
    return [s for c in (*item.components, *item.fixed) for s in _strings([c.text, c.title, c.answer, c.metadata])]


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def test_every_set_and_auxiliary_task_have_an_enumerator():
    assert set(ENUMERATORS) == {*available_sets(), *AUXILIARY_TASKS}


def test_echo_items_ask_for_each_option_by_name_with_a_uniform_gold_slot():
    its = echo.echo_items(400)
    assert {it.gold_index for it in its} == {0, 1, 2, 3}
    assert max(sum(it.gold_index == k for it in its) for k in range(4)) < 0.32 * len(its)
    for it in its[:50]:
        assert recognised(it) and len(set(it.choices)) == 4
        qas = questions(it)
        assert sorted(q.gold for q in qas) == sorted(it.choices)
        for qa in qas:
            assert qa.question == echo.QUESTION.format(w=qa.gold) and qa.rationale == echo.RATIONALE.format(w=qa.gold)
            assert sibling(it, qa).gold == qa.gold
    assert echo.echo_items(5) == echo.echo_items(5) and echo.echo_items(5, seed=1) != echo.echo_items(5)


def test_the_own_question_of_every_item_is_recognised(items):
    """Fails when a generator's wording changes without this module following."""
    for (name, split), its in items.items():
        assert len(its) == 50
        missed = [it.question for it in its if not recognised(it)]
        assert not missed, (name, split, missed[:3])


def test_own_question_comes_first_with_its_gold_and_is_its_own_sibling(items):
    for its in items.values():
        for it in its:
            qas = questions(it)
            assert (qas[0].question, qas[0].gold) == (it.question, it.gold)
            assert rationale(it) == qas[0].rationale
            assert sibling(it, qas[0]) is it


def test_most_items_answer_several_questions(items):
    """Several questions per rendered context is what the packed training shares."""
    for (name, split), its in items.items():
        several = sum(len(questions(it)) > 1 for it in its)
        assert several >= 0.9 * len(its), (name, split, several)


def test_each_question_has_one_gold_found_in_the_evidence(items):
    for (name, _), its in items.items():
        for it in its:
            qas = questions(it)
            assert len({qa.question for qa in qas}) == len(qas), (name, [qa.question for qa in qas])  # unambiguous
            evidence = _evidence(it)
            for qa in qas:
                if it.answer_type == AnswerType.MCQ:
                    assert qa.gold in it.choices, (name, qa)
                category = re.fullmatch(r"Which one is an? (\w+)\?", qa.question)
                if category:  # world knowledge: the one option of that category
                    assert [c for c in it.choices if c in CATEGORIES[category[1]]] == [qa.gold], (qa, it.choices)
                elif name == "synthetic_mcq":  # the story in the question
                    assert _mentions(qa.question.rpartition(" What does ")[0], qa.gold), qa
                else:
                    assert any(_mentions(s, qa.gold) for s in evidence), (name, qa)


def test_rationale_is_one_or_two_sentences_stating_the_answer(items):
    for (name, _), its in items.items():
        for it in its:
            demos = {c.text: (c.answer or "").strip() for c in it.components}
            for qa in questions(it):
                sentences = re.split(r"(?<=\.)\s+", qa.rationale.strip())
                assert 1 <= len(sentences) <= 2 and all(s.endswith(".") for s in sentences), (name, qa)
                assert not qa.rationale.startswith("The evidence points to")  # the unrecognised fallback
                if name == "synthetic_few_shot":  # "The fox is an animal, like the hen.": the hen's code
                    example = re.fullmatch(r"The \w+ is an? \w+, like the (\w+)\.", qa.rationale).group(1)
                    shown = [code for text, code in demos.items() if _mentions(text, example)]
                    assert shown == [qa.gold], (qa, demos)
                else:
                    assert _mentions(qa.rationale, qa.gold), (name, qa)


def test_siblings_are_valid_items_over_the_same_evidence(items):
    for (name, _), its in items.items():
        for it in its:
            for qa in questions(it)[1:]:
                sib = sibling(it, qa)
                assert (sib.question, sib.gold) == (qa.question, qa.gold)
                assert (sib.item_id, sib.dataset, sib.answer_type) == (it.item_id, it.dataset, it.answer_type)
                assert sib.components == it.components and sib.fixed == it.fixed and sib.choices == it.choices
                assert sib.metadata["sibling_of"] == it.item_id
                if it.answer_type == AnswerType.MCQ:
                    assert sib.choices[sib.gold_index] == qa.gold
                # the sibling is an item the generator could have drawn: its questions are the same set
                assert recognised(sib), (name, qa)
                assert {(q.question, q.gold) for q in questions(sib)} == {(q.question, q.gold) for q in questions(it)}
