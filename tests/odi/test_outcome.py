"""The binary outcome per trial: correct, or equal to the model's modal answer (ours: ties broken by a hash,
no answer scores 0; the reference's: a tied group and trials without an answer dropped)."""

from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

from facet_probe.core.errors import ConfigError
from facet_probe.odi.outcome import ModalRule, modal_answers, modal_rule_for, outcome_values, tie_rank


def trials(answers, model="m", item="d::1", correct=None, dataset="d"):
    rows = [{"model": model, "facet": "option_order", "dataset": dataset, "item_id": item, "ordering_idx": k,
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


# --- the reference's rule (issue 60, point 2) -----------------------------------------------------------------


def reference_modal_export(records: list[dict]) -> tuple[dict[int, int], int, int]:
    """FACET-PROBE v0.0.1 irt.py's modal rows in a few lines (`_clean_text`, `_modal_answers`, `_build_irt_export`):
    ({record index: y}, skipped_tied_modal_trials, skipped_missing_answer)."""
    def clean(value):
        text = None if value is None else str(value).strip()
        return text or None

    grouped = defaultdict(list)
    for r in records:
        grouped[(r["facet"], r["dataset"], r["model"], r["item_id"])].append(clean(r["answer"]))
    modal, tied = {}, set()
    for key, answers in grouped.items():
        ranked = Counter(a for a in answers if a).most_common()
        if not ranked:
            continue
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            tied.add(key)
            continue
        modal[key] = ranked[0][0]
    rows, skipped_tied, skipped_missing = {}, 0, 0
    for i, r in enumerate(records):
        key, answer = (r["facet"], r["dataset"], r["model"], r["item_id"]), clean(r["answer"])
        if key in tied:
            skipped_tied += 1
        elif answer is None or key not in modal:
            skipped_missing += 1
        else:
            rows[i] = int(answer == modal[key])
    return rows, skipped_tied, skipped_missing


def random_panel(seed: int) -> tuple[list[dict], pd.DataFrame]:
    """Reference records (None = unparsed) and the same trials as we store them (`<parse_error>`, parse_status),
    with padded answers, empty ones, and one item id under two datasets; small answer sets, so many ties."""
    rng = np.random.default_rng(seed)
    choices = np.array(["A", "B", "C", " A", "B ", "", None], dtype=object)
    records = [{"model": f"m{m}", "facet": facet, "dataset": dataset, "item_id": f"q{i}", "ordering_idx": k,
                "answer": choices[rng.choice(7, p=[0.3, 0.25, 0.1, 0.1, 0.1, 0.05, 0.1])]}
               for m in range(3) for facet in ("option_order", "image_set_order") for dataset in ("d1", "d2")
               for i in range(6) for k in range(6)]
    ours = pd.DataFrame([{**{k: v for k, v in r.items() if k != "answer"},
                          "answer_normalized": "<parse_error>" if r["answer"] is None else r["answer"],
                          "parse_status": "parse_error" if r["answer"] is None else "ok"} for r in records])
    return records, ours


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_drop_ties_is_the_references_modal_export(seed):
    """The same rows kept, the same y, and the reference's two skip counts (its tied trials; its missing answers =
    our unparsed trials in untied groups + the trials of groups with no answer at all)."""
    records, frame = random_panel(seed)
    rows, skipped_tied, skipped_missing = reference_modal_export(records)
    y, keep, notes = outcome_values(frame, "modal", ModalRule.drop_ties)
    assert np.flatnonzero(keep).tolist() == sorted(rows)
    assert y.tolist() == [rows[i] for i in sorted(rows)]
    assert notes["dropped_tied_trials"] == skipped_tied > 0
    assert notes["dropped_unparsed_trials"] + notes["dropped_no_parsed_answer"] == skipped_missing > 0
    assert notes["trials_kept"] == len(rows) and notes["trials_read"] == len(records)


def test_break_ties_keeps_every_trial_of_a_group_with_an_answer_and_scores_no_answer_0():
    frame = trials(["A", "B", "A", "B", "<parse_error>", " "])
    y, keep, notes = outcome_values(frame, "modal", ModalRule.break_ties)
    assert keep.all() and y.sum() == 2 and y[4:].tolist() == [0, 0]
    assert (notes["groups_with_tie"], notes["unparsed_scored_0"], notes["dropped_tied_trials"]) == (1, 2, 0)
    y, keep, notes = outcome_values(frame, "modal", ModalRule.drop_ties)
    assert not keep.any() and (notes["dropped_tied_groups"], notes["dropped_tied_trials"]) == (1, 6)


def test_the_modal_group_is_per_dataset():
    """The reference groups by (facet, dataset, model, item_id): one id under two datasets is two groups."""
    frame = pd.concat([trials(["A", "A", "B"], dataset="d1"), trials(["B", "B", "A"], dataset="d2")],
                      ignore_index=True)
    modal = modal_answers(frame).set_index("dataset")["modal_answer"]
    assert modal.to_dict() == {"d1": "A", "d2": "B"}


def test_the_modal_rule_follows_the_variant_unless_set():
    assert modal_rule_for("paper") is ModalRule.drop_ties
    assert modal_rule_for("positional") is ModalRule.break_ties
    assert modal_rule_for("paper", "break_ties") is ModalRule.break_ties
    with pytest.raises(ConfigError, match="drop_ties, break_ties"):
        modal_rule_for("paper", "hash")
