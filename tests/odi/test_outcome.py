"""The binary outcome per trial: correct, or equal to the model's modal answer (with the tie rule)."""

import pandas as pd
import pytest

from facet_probe.odi.outcome import modal_answers, outcome_values, tie_rank


def trials(answers, model="m", item="d::1", correct=None):
    rows = [{"model": model, "facet": "option_order", "item_id": item, "ordering_idx": k,
             "answer_normalized": a, "parse_status": "parse_error" if a == "<parse_error>" else "ok",
             "correct": None if correct is None else correct[k]} for k, a in enumerate(answers)]
    return pd.DataFrame(rows)


def test_the_modal_answer_is_the_most_frequent_parsed_answer():
    frame = trials(["A", "B", "A", "<parse_error>", "<parse_error>", "<parse_error>"])
    modal = modal_answers(frame)
    assert modal.loc[0, "modal_answer"] == "A" and modal.loc[0, "modal_count"] == 2
    y, keep, _ = outcome_values(frame, "modal")
    assert keep.all()
    assert y.tolist() == [1, 0, 1, 0, 0, 0]  # parse errors are never modal and score 0


def test_ties_are_broken_by_the_hash_rule_whatever_the_row_order():
    frame = trials(["A", "B", "A", "B"])
    expected = min(["A", "B"], key=lambda a: tie_rank("m", "option_order", "d::1", a))
    assert modal_answers(frame).loc[0, "modal_answer"] == expected
    assert modal_answers(frame.iloc[::-1]).loc[0, "modal_answer"] == expected
    assert modal_answers(frame).loc[0, "n_tied"] == 2
    y, _, notes = outcome_values(frame, "modal")
    assert y.sum() == 2 and notes["groups_with_tie"] == 1


def test_modal_answers_are_per_model_and_item():
    frame = pd.concat([trials(["A", "A", "B"], model="m1"), trials(["B", "B", "A"], model="m2"),
                       trials(["C", "C", "C"], model="m1", item="d::2")], ignore_index=True)
    modal = modal_answers(frame).set_index(["model", "item_id"])["modal_answer"]
    assert modal.to_dict() == {("m1", "d::1"): "A", ("m1", "d::2"): "C", ("m2", "d::1"): "B"}


def test_an_item_with_only_parse_errors_is_dropped_and_counted():
    frame = pd.concat([trials(["<parse_error>"] * 3, item="d::1"), trials(["A", "A", "B"], item="d::2")],
                      ignore_index=True)
    y, keep, notes = outcome_values(frame, "modal")
    assert keep.tolist() == [False] * 3 + [True] * 3
    assert y.tolist() == [1, 1, 0] and notes["dropped_no_parsed_answer"] == 3


def test_correct_outcome_drops_unscored_trials():
    frame = trials(["A", "B", "C"], correct=[True, None, False])
    y, keep, notes = outcome_values(frame, "correct")
    assert y.tolist() == [1, 0] and keep.tolist() == [True, False, True] and notes["dropped_unscored"] == 1


def test_unknown_outcome_is_a_clear_error():
    with pytest.raises(ValueError, match="modal, correct"):
        outcome_values(trials(["A"]), "accuracy")
