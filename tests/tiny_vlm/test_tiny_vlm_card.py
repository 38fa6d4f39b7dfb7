"""The model card of a model trained with `answer_first_background` (issue 45) reads its form per background level."""

from __future__ import annotations

from facet_probe_dev.tiny_vlm.card import BACKGROUND_LEVELS, background_section, trained_background

BG = {"low": 230, "high": 255, "threshold": 245, "white_share": 0.3, "channels": "b"}


def test_the_card_finds_the_background_a_stage_trained_and_none_on_a_model_without_one():
    r1 = {"stages": [{"name": "all", "answer_first": {}}]}  # the shipped run's log: no such key at all
    assert trained_background(r1) is None
    later = {"stages": [*r1["stages"], {"name": "bg", "answer_first_background": {"synthetic_visual_mcq": BG}}]}
    assert trained_background(later) == BG
    assert BACKGROUND_LEVELS[0] == 255 and 255 - 16 in BACKGROUND_LEVELS  # white, and the attack's reach


def test_the_background_section_has_one_row_per_level_with_the_share_answering_first():
    rows = [{"level": 255, "channels": "b", "items": 30, "ce_answer_after_the": 0.66, "greedy_answer_first": 0.53,
             "greedy_first_correct": 1.0, "greedy_correct": 1.0},
            {"level": 239, "channels": "b", "items": 30, "ce_answer_after_the": 0.58, "greedy_answer_first": 0.0,
             "greedy_first_correct": None, "greedy_correct": 0.9}]
    text = "\n".join(background_section(rows, BG))
    assert "levels 230..255 (30% kept white)" in text and "below 245" in text and "first 30 test items" in text
    assert "| 255 | 0.66 | 0.53 | 1.00 | 1.00 |" in text and "| 239 | 0.58 | 0.00 | - | 0.90 |" in text
