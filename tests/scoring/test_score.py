"""Scoring: displayed answers map back to their meaning, so answers compare across orderings."""

from __future__ import annotations

import itertools

import pytest

from facet_probe.core.items import make_item
from facet_probe.core.prompts import PromptMode
from facet_probe.core.trials import PARSE_ERROR, Trial
from facet_probe.facets import FACETS
from facet_probe.facets.examples import example_item
from facet_probe.scoring.score import ScoreKind, permutes_choices, score, tool_names, with_judge_verdict


def _score(facet_name: str, perm, reply: str, mode=PromptMode.DIRECT, item=None):
    facet = FACETS[facet_name]()
    item = item or example_item(facet_name)
    return score(item, facet, perm, facet.render(item, perm, mode), reply)


def test_option_order_maps_the_displayed_letter_through_the_permutation():
    # choices (circle, square, triangle, star), gold = square (source B).
    # perm [2, 0, 3, 1] displays A=triangle, B=circle, C=star, D=square.
    s = _score("option_order", [2, 0, 3, 1], "Answer: D")
    assert (s.answer_raw, s.answer_normalized, s.gold_normalized, s.correct) == ("D", "B", "B", True)
    assert (s.score_kind, s.parse_status) == (ScoreKind.INVERSE_PERMUTATION, "ok")
    s = _score("option_order", [2, 0, 3, 1], "The answer is (A).", PromptMode.COT)
    assert (s.answer_raw, s.answer_normalized, s.correct) == ("A", "C", False)


def test_option_order_answers_mean_the_same_option_under_every_ordering():
    for perm in itertools.permutations(range(4)):
        for slot, source in enumerate(perm):
            s = _score("option_order", list(perm), f"Answer: {'ABCD'[slot]}")
            assert s.answer_normalized == "ABCD"[source]
            assert s.correct == (source == 1)


def test_image_set_order_scores_the_letter_because_options_stay_in_place():
    # choices ("0", "1", "2", "3"), gold "2" = C; the images are permuted, the options are not.
    s = _score("image_set_order", [2, 1, 0], "Answer: C")
    assert (s.answer_normalized, s.correct, s.score_kind) == ("C", True, ScoreKind.LETTER)
    assert not permutes_choices(FACETS["image_set_order"]())
    assert permutes_choices(FACETS["option_order"]())


@pytest.mark.parametrize(("reply", "normalized", "correct", "status"), [
    ("Answer: Oslo.", "oslo", True, "ok"),
    ("Answer: the city of Oslo", "city of oslo", False, "ok"),
    ("Oslo", "oslo", True, "fallback"),
    ("She lives somewhere in the north, I believe, near the fjords and mountains.", PARSE_ERROR, False,
     "parse_error"),
    ("Answer: ...", PARSE_ERROR, False, "parse_error"),
])
def test_free_form_is_normalised_exact_match(reply, normalized, correct, status):
    s = _score("evidence_chunk_order", [2, 0, 1], reply)
    assert (s.answer_normalized, s.gold_normalized, s.correct, s.parse_status) == (
        normalized, "oslo", correct, status)
    assert s.score_kind == ScoreKind.EXACT_MATCH


def test_free_form_accepts_aliases_and_number_forms():
    item = make_item(item_id="toy::n", dataset="toy", answer_type="free", question="How many cats?",
                     gold_answer="2", answer_aliases=("a pair",),
                     components=({"id": "c0", "kind": "text_chunk", "text": "Two cats."},
                                 {"id": "c1", "kind": "text_chunk", "text": "No dogs."}))
    for reply in ("Answer: two", "Answer: 2.0", "Answer: A pair."):
        assert _score("evidence_chunk_order", [1, 0], reply, item=item).correct, reply
    assert not _score("evidence_chunk_order", [1, 0], "Answer: three", item=item).correct


def test_tool_answers_are_function_names_among_the_offered_tools():
    item = example_item("tool_description_order")
    assert tool_names(item) == ("get_time", "get_forecast", "convert_currency")
    s = _score("tool_description_order", [2, 1, 0], "Answer: get_forecast(city='Oslo', day=1)")
    assert (s.answer_raw, s.answer_normalized, s.correct, s.score_kind) == (
        "get_forecast", "get_forecast", True, ScoreKind.TOOL_NAME)
    s = _score("tool_description_order", [2, 1, 0], "Answer: get_weather")
    assert (s.answer_normalized, s.correct, s.parse_status) == (PARSE_ERROR, False, "parse_error")


def test_parse_errors_are_explicit_and_incorrect():
    s = _score("option_order", [0, 1, 2, 3], "Answer: Carbon dioxide")
    assert (s.answer_raw, s.answer_normalized, s.gold_normalized, s.correct, s.parse_status) == (
        None, PARSE_ERROR, "B", False, "parse_error")


def test_a_judge_verdict_replaces_exact_match_but_not_a_parse_error():
    s = _score("evidence_chunk_order", [0, 1, 2], "Answer: the city of Oslo")
    judged = with_judge_verdict(s, True)
    assert (judged.correct, judged.score_kind, judged.answer_normalized) == (True, "judge", "city of oslo")
    failed = _score("evidence_chunk_order", [0, 1, 2], "no idea, sorry, I cannot tell from these chunks at all")
    assert with_judge_verdict(failed, True) == failed


def test_score_fields_are_trial_fields():
    s = _score("option_order", [1, 0, 2, 3], "Answer: A")
    trial = Trial(trial_key="t", call_key="c", model="m", facet="option_order", dataset="example",
                  item_id="example::option", ordering_idx=1, repeat_idx=0, permutation=[1, 0, 2, 3],
                  component_ids=[], prompt_hash="h", mode="direct", raw_output="Answer: A", **s.as_dict())
    assert (trial.answer_normalized, trial.correct) == ("B", True)


def test_a_prompt_rendered_for_another_item_is_refused():
    facet = FACETS["option_order"]()
    item = example_item("option_order")
    other = make_item(item_id="example::three", dataset="example", question="Pick one.",
                      choices=("x", "y", "z"), gold_index=0)
    with pytest.raises(ValueError, match="rendered for this item"):
        score(item, facet, [0, 1, 2, 3], facet.render(other, [0, 1, 2]), "Answer: A")
