"""Every synthetic item is valid for the facets its set declares, has exactly one answer, derivable from
its components in any order, and no position is favoured."""

from __future__ import annotations

import importlib
import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml
from synthetic_samples import SET_NAMES, sample
from synthetic_solvers import SOLVERS

from facet_probe.core.items import AnswerType, ComponentKind
from facet_probe.core.permutations import sample_permutations
from facet_probe.core.prompts import PromptMode
from facet_probe.datasets.synthetic import SYNTHETIC_SETS

CONF = Path(__file__).resolve().parents[3] / "facet_probe" / "conf"

#: The component kinds each set orders (choices for the MCQ sets live in `item.choices`).
EXPECTED_KINDS = {
    "synthetic_mcq": set(), "synthetic_visual_mcq": set(), "synthetic_evidence": {ComponentKind.TEXT_CHUNK},
    "synthetic_docs": {ComponentKind.DOCUMENT}, "synthetic_image_set": {ComponentKind.IMAGE},
    "synthetic_mixed": {ComponentKind.TEXT_CHUNK, ComponentKind.IMAGE},
    "synthetic_dialog": {ComponentKind.DIALOG_TURN}, "synthetic_few_shot": {ComponentKind.FEW_SHOT},
    "synthetic_tools": {ComponentKind.TOOL},
}


def facet_for(name: str):
    target = yaml.safe_load((CONF / "facet" / f"{name}.yaml").read_text())["_target_"]
    module, cls = target.rsplit(".", 1)
    return getattr(importlib.import_module(module), cls)()


def test_each_set_declares_the_facet_of_its_kind():
    declared = {name: cls.facets for name, cls in SYNTHETIC_SETS.items()}
    assert declared == {
        "synthetic_mcq": ("option_order",), "synthetic_visual_mcq": ("option_order",),
        "synthetic_evidence": ("evidence_chunk_order",), "synthetic_docs": ("document_rank_order",),
        "synthetic_image_set": ("image_set_order",), "synthetic_mixed": ("mixed_modality_order",),
        "synthetic_dialog": ("dialog_turn_order",), "synthetic_few_shot": ("few_shot_order",),
        "synthetic_tools": ("tool_description_order",)}


@pytest.mark.parametrize("name", SET_NAMES)
def test_items_have_the_component_kinds_of_their_set(name):
    for item in sample(name):
        assert {c.kind for c in item.components} == EXPECTED_KINDS[name]
        if name == "synthetic_mixed":
            kinds = [c.kind for c in item.components]
            assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False)), "text and image alternate"
        if name == "synthetic_dialog":
            roles = [c.role for c in item.components]
            assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)
        if item.answer_type == AnswerType.MCQ:
            assert len(item.choices) == 4 == len(set(item.choices))


@pytest.mark.parametrize("name", SET_NAMES)
def test_declared_facets_support_and_render_every_item(name):
    for facet_name in SYNTHETIC_SETS[name].facets:
        facet = facet_for(facet_name)
        for item in sample(name)[:60]:
            assert facet.unsupported_reason(item) is None
            n = len(facet.orderables(item))
            for perm in sample_permutations(n, k=3, item_id=item.item_id):
                prompt = facet.render(item, perm, PromptMode.DIRECT)
                assert item.question in prompt.messages[-1].text()
                assert len(prompt.images()) == len(item.images())


@pytest.mark.parametrize("name", SET_NAMES)
def test_the_components_as_a_set_give_exactly_the_gold_in_any_order(name):
    rng = random.Random(0)
    solve = SOLVERS[name]
    for item in sample(name):
        for _ in range(3):
            comps = list(item.components)
            rng.shuffle(comps)
            assert solve(item, comps) == {item.gold}, item.item_id


@pytest.mark.parametrize("name", SET_NAMES)
def test_supporting_components_are_marked_and_free_form_components_carry_their_answer(name):
    for item in sample(name):
        if not item.components:
            continue
        supporting = [c for c in item.components if c.metadata["supporting"]]
        assert 1 <= len(supporting) <= (4 if name == "synthetic_few_shot" else 2)
        assert len(supporting) < len(item.components), "at least one distractor"
        if item.answer_type != AnswerType.MCQ:
            answers = [c.metadata["answer"] for c in item.components]
            assert item.gold in answers
            assert set(answers) != {item.gold}, "a distractor answers differently"
    if name == "synthetic_evidence":
        assert {len([c for c in i.components if c.metadata["supporting"]]) for i in sample(name)} == {1, 2}


@pytest.mark.parametrize("name", ["synthetic_visual_mcq", "synthetic_evidence", "synthetic_docs",
                                  "synthetic_image_set", "synthetic_mixed", "synthetic_dialog",
                                  "synthetic_few_shot", "synthetic_tools"])
def test_the_question_alone_does_not_give_the_answer(name):
    """The best question-only guesser (majority gold per question, fitted on train) stays near chance."""
    by_question: dict[str, Counter] = defaultdict(Counter)
    for draft in SYNTHETIC_SETS[name](name=name, split="train", holdout_n=300).drafts(2000):  # no rendering needed
        by_question[draft.content["question"]][draft.content["gold"]] += 1
    test = sample(name)
    hits = sum(by_question[i.question].most_common(1)[0][0] == i.gold for i in test if by_question[i.question])
    assert hits / len(test) < 0.5


@pytest.mark.parametrize("name", ["synthetic_mcq", "synthetic_visual_mcq", "synthetic_image_set"])
def test_gold_option_positions_are_uniform(name):
    counts = Counter(i.gold_index for i in sample(name, 2000, image_size=16))
    assert sorted(counts) == [0, 1, 2, 3]
    assert all(0.2 < c / 2000 < 0.3 for c in counts.values()), counts


@pytest.mark.parametrize("name", ["synthetic_evidence", "synthetic_docs", "synthetic_image_set", "synthetic_mixed",
                                  "synthetic_dialog", "synthetic_few_shot", "synthetic_tools"])
def test_supporting_components_sit_anywhere_in_source_order(name):
    """Mean relative position of supporting components ~0.5 and first-slot share ~E[1/n]."""
    positions, first, expected_first = [], 0, 0.0
    items = sample(name, 2000, image_size=16)
    for item in items:
        n = len(item.components)
        slots = [j for j, c in enumerate(item.components) if c.metadata["supporting"]]
        positions += [j / (n - 1) for j in slots]
        first += 0 in slots
        expected_first += len(slots) / n
    assert abs(sum(positions) / len(positions) - 0.5) < 0.03
    assert abs(first - expected_first) / expected_first < 0.1
