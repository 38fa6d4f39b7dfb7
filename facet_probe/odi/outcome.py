"""The binary outcome y of each trial: `correct`, or `modal` (the answer equals the model's modal answer).

The modal answer of a (model, facet, dataset, item_id) group is its most frequent answer over all its orderings
and repeats. A trial's answer is read as the reference reads it (FACET-PROBE v0.0.1 `irt._clean_text`): the
text stripped, and *no answer* where it is a parse error (`<parse_error>`, `parse_status=parse_error`, null) or
empty after stripping. Two rules (`odi.modal_rule`, `ModalRule`) differ where the top count ties and for trials
without an answer:

- `drop_ties` (the reference's `_build_irt_export`): a group whose top count ties is dropped whole, and a
  trial without an answer is dropped.
- `break_ties` (ours): among tied answers the one with the smallest SHA-256 of ``model | facet | item_id |
  answer`` wins, and a trial without an answer stays and scores 0 (it did not give the modal answer). Which
  tied answer wins never changes how many trials score 1; a hash is reproducible and unrelated to ordering
  index, display position and correctness, so it adds no order effect.

Under both, a group with no answer at all has no modal answer and its trials are dropped. Every drop is counted
in the notes. For `correct`, trials whose `correct` is missing (e.g. awaiting a judge) are dropped and counted.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

import numpy as np
import pandas as pd

from facet_probe.core.errors import parse_enum

OUTCOMES = ("modal", "correct")
PARSE_ERROR_ANSWERS = ("<parse_error>", "PARSE_ERROR")
GROUP = ["model", "facet", "dataset", "item_id"]


class ModalRule(StrEnum):
    """What the modal outcome does with tied groups and trials without an answer (`odi.modal_rule`)."""

    drop_ties = "drop_ties"  # the reference's: a tied group dropped whole, a trial without an answer dropped
    break_ties = "break_ties"  # ours: ties broken by a hash, a trial without an answer scores 0


#: The rule each ODI variant takes when `odi.modal_rule` is null: the paper variant reproduces the reference.
MODAL_RULE_OF_VARIANT = {"paper": ModalRule.drop_ties, "positional": ModalRule.break_ties}


def modal_rule_for(variant: str, setting: str | ModalRule | None = None) -> ModalRule:
    """`odi.modal_rule` as a ModalRule; null follows the variant (MODAL_RULE_OF_VARIANT)."""
    if setting is None:
        return MODAL_RULE_OF_VARIANT[str(variant)]
    return parse_enum(ModalRule, setting, "odi.modal_rule")


def answer_text(frame: pd.DataFrame) -> pd.Series:
    """Each trial's answer, stripped; missing where it gave none (a parse error, null, or empty)."""
    answer = frame["answer_normalized"].astype("string").str.strip()
    none = answer.isna() | answer.eq("") | answer.isin(PARSE_ERROR_ANSWERS)
    if "parse_status" in frame:
        none |= frame["parse_status"].astype(str).eq("parse_error")
    return answer.mask(none)


def tie_rank(model: str, facet: str, item_id: str, answer: str) -> str:
    """Hash that orders tied answers reproducibly and independently of ordering and correctness."""
    return hashlib.sha256(f"{model}|{facet}|{item_id}|{answer}".encode()).hexdigest()


def modal_answers(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per group with an answer: `modal_answer` (a tie broken by `tie_rank`), `modal_count`, `n_tied`
    (how many answers share the top count; > 1 is a tie)."""
    answered = frame[GROUP].astype(str).assign(answer=answer_text(frame).astype(object)).dropna(subset="answer")
    counts = answered.value_counts().rename("count").reset_index()
    top = counts.groupby(GROUP)["count"].transform("max")
    tied = counts[counts["count"] == top].copy()
    tied["tie_rank"] = [tie_rank(m, f, i, a) for m, f, i, a in
                        tied[["model", "facet", "item_id", "answer"]].itertuples(index=False)]
    tied["n_tied"] = tied.groupby(GROUP)["count"].transform("size")
    best = tied.sort_values([*GROUP, "tie_rank"]).drop_duplicates(GROUP, keep="first")
    return best.rename(columns={"answer": "modal_answer", "count": "modal_count"})[
        [*GROUP, "modal_answer", "modal_count", "n_tied"]].reset_index(drop=True)


def modal_values(frame: pd.DataFrame, rule: ModalRule) -> tuple[np.ndarray, np.ndarray, dict]:
    """(y for the kept trials, keep mask over `frame`, notes: the rule and what it dropped or scored 0)."""
    modal = modal_answers(frame)
    merged = frame[GROUP].astype(str).merge(modal, on=GROUP, how="left")
    answer = answer_text(frame).to_numpy(dtype=object, na_value=None)
    answered = pd.notna(answer)
    has_modal = merged["modal_answer"].notna().to_numpy()
    tied = has_modal & (merged["n_tied"].to_numpy() > 1)
    unanswered = has_modal & ~answered
    drop = rule is ModalRule.drop_ties
    keep = has_modal & ~tied & answered if drop else has_modal
    y = (answered & (answer == merged["modal_answer"].to_numpy(dtype=object)))[keep].astype(np.int8)
    notes = {"modal_rule": str(rule), "trials_read": len(frame), "trials_kept": int(keep.sum()),
             "groups_with_tie": int((modal["n_tied"] > 1).sum()),
             "dropped_tied_groups": int((modal["n_tied"] > 1).sum()) if drop else 0,
             "dropped_tied_trials": int(tied.sum()) if drop else 0,
             "dropped_unparsed_trials": int((unanswered & ~tied).sum()) if drop else 0,
             "unparsed_scored_0": 0 if drop else int(unanswered.sum()),
             "dropped_no_parsed_answer": int((~has_modal).sum())}
    return y, keep, notes


def outcome_values(frame: pd.DataFrame, outcome: str, modal_rule: ModalRule = ModalRule.break_ties,
                   ) -> tuple[np.ndarray, np.ndarray, dict]:
    """(y as int8 for the kept trials, boolean keep mask over `frame`, notes with drop counts)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; choose one of {', '.join(OUTCOMES)}")
    if outcome == "modal":
        return modal_values(frame, modal_rule)
    if "correct" not in frame:
        raise ValueError("outcome=correct needs a `correct` column in the trials")
    keep = frame["correct"].notna().to_numpy()
    y = frame.loc[keep, "correct"].astype(bool).to_numpy().astype(np.int8)
    return y, keep, {"trials_read": len(frame), "trials_kept": int(keep.sum()), "dropped_unscored": int((~keep).sum())}
