"""Option-order datasets: MMLU-Pro, CommonsenseQA and MathVision rows become MCQ items."""

from __future__ import annotations

import hashlib

import upstream_fixtures as fx

from facet_probe.core.items import AnswerType
from facet_probe.datasets import commonsense_qa, mathvision, mmlu_pro


def test_mmlu_pro_keeps_the_options_in_order_and_takes_gold_from_answer_index():
    row = {
        "question_id": 12,
        "question": "2+2?",
        "options": ["3", "4", "5", "6"],
        "answer": "B",
        "answer_index": 1,
        "category": "math",
        "src": "ori",
    }
    item = mmlu_pro.row_to_item(row)
    assert item.item_id == "mmlu_pro::12" and item.choices == ("3", "4", "5", "6") and item.gold == "4"
    assert item.answer_type == AnswerType.MCQ and item.metadata["category"] == "math"


def test_mmlu_pro_needs_four_options_and_a_gold_index_among_them():
    base = {"options": ["a", "b", "c", "d"], "answer_index": 3}
    assert mmlu_pro.eligible(base)
    assert not mmlu_pro.eligible({**base, "options": ["a", "b", "c"]})
    assert not mmlu_pro.eligible({**base, "answer_index": 4})


def test_commonsense_qa_maps_the_answer_key_to_its_label_position():
    row = {
        "id": "x1",
        "question": "Where?",
        "question_concept": "c",
        "choices": {"label": ["A", "B", "C", "D", "E"], "text": ["v", "w", "x", "y", "z"]},
        "answerKey": "D",
    }
    item = commonsense_qa.row_to_item(row)
    assert item.gold_index == 3 and item.gold == "y" and item.item_id == "commonsense_qa::x1"
    assert not commonsense_qa.eligible({**row, "answerKey": ""})


def test_mathvision_shows_the_figure_as_fixed_context_and_drops_letter_only_options(tmp_path, offline):
    items = mathvision.MathVision(path=str(fx.mathvision(tmp_path / "mv"))).load_all()
    assert [it.raw_id for it in items] == ["1", "5", "9"]  # real options and a letter answer only
    first = items[0]
    assert first.question.startswith("How many squares") and "<image1>" not in first.question
    assert first.choices == ("3", "4", "5", "6", "7") and first.gold == "4"
    assert [c.id for c in first.fixed] == ["figure"] and first.components == ()
    assert first.fixed[0].image.sha256 == hashlib.sha256(fx.image_bytes(0)).hexdigest()


def test_mathvision_filter_rules():
    assert mathvision.letter_only(["A", "B", "(C)", "D"])
    assert not mathvision.letter_only(["3", "4", "5"])
    assert not mathvision.eligible({"options": ["1", "2", "3"], "answer": "12"})  # free-form answer
    assert not mathvision.eligible({"options": ["1", "2"], "answer": "A"})  # fewer than 3 options
    assert mathvision.eligible({"options": ["1", "2", "3"], "answer": "C"})
