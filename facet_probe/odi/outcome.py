"""The binary outcome y of each trial: `correct`, or `modal` (the answer equals the model's modal answer).

Modal rule: for each (model, facet, item) the modal answer is the most frequent *parsed*
`answer_normalized` over all its orderings and repeats. Tie rule: among tied answers the one with
the smallest SHA-256 of ``model | facet | item_id | answer`` wins. The choice among tied answers does
not change how many trials score 1 (each tied answer has the same count); it only decides *which*
orderings do. A hash is reproducible yet unrelated to ordering index, display position and
correctness, so ties add no spurious order effect (picking the identity ordering's answer would add
one at k=0; picking the gold or letter 'A' would tie y to correctness or to a source slot).
Parse errors are never modal and score 0 (they did not give the modal answer); a (model, item) with
no parsed answer at all has no modal answer and its trials are dropped (counted in the notes).
For `correct`, trials whose `correct` is missing (e.g. awaiting a judge) are dropped and counted.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

OUTCOMES = ("modal", "correct")
PARSE_ERROR_ANSWERS = ("", "<parse_error>", "PARSE_ERROR")
GROUP = ["model", "facet", "item_id"]


def parsed_mask(frame: pd.DataFrame) -> pd.Series:
    """True for trials with a usable answer (not a parse error)."""
    answer = frame["answer_normalized"]
    ok = answer.notna() & ~answer.astype(str).isin(PARSE_ERROR_ANSWERS)
    if "parse_status" in frame:
        ok &= frame["parse_status"].astype(str) != "parse_error"
    return ok


def tie_rank(model: str, facet: str, item_id: str, answer: str) -> str:
    """Hash that orders tied answers reproducibly and independently of ordering and correctness."""
    return hashlib.sha256(f"{model}|{facet}|{item_id}|{answer}".encode()).hexdigest()


def modal_answers(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, facet, item_id) with a parsed answer: `modal_answer`, `modal_count`, `n_tied`."""
    parsed = frame.loc[parsed_mask(frame), [*GROUP, "answer_normalized"]].astype(str)
    counts = parsed.value_counts().rename("count").reset_index()
    top = counts.groupby(GROUP)["count"].transform("max")
    tied = counts[counts["count"] == top].copy()
    tied["tie_rank"] = [tie_rank(*row) for row in tied[[*GROUP, "answer_normalized"]].itertuples(index=False)]
    tied["n_tied"] = tied.groupby(GROUP)["count"].transform("size")
    best = tied.sort_values([*GROUP, "tie_rank"]).drop_duplicates(GROUP, keep="first")
    return best.rename(columns={"answer_normalized": "modal_answer", "count": "modal_count"})[
        [*GROUP, "modal_answer", "modal_count", "n_tied"]].reset_index(drop=True)


def outcome_values(frame: pd.DataFrame, outcome: str) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(y as int8 for the kept trials, boolean keep mask over `frame`, notes with drop counts)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; choose one of {', '.join(OUTCOMES)}")
    if outcome == "correct":
        if "correct" not in frame:
            raise ValueError("outcome=correct needs a `correct` column in the trials")
        keep = frame["correct"].notna().to_numpy()
        y = frame.loc[keep, "correct"].astype(bool).to_numpy().astype(np.int8)
        return y, keep, {"dropped_unscored": int((~keep).sum())}
    modal = modal_answers(frame)
    merged = frame[GROUP].astype(str).merge(modal, on=GROUP, how="left")
    keep = merged["modal_answer"].notna().to_numpy()
    same = frame["answer_normalized"].astype(str).to_numpy() == merged["modal_answer"].to_numpy()
    y = (same & parsed_mask(frame).to_numpy())[keep].astype(np.int8)
    notes = {"dropped_no_parsed_answer": int((~keep).sum()),
             "groups_with_tie": int((modal["n_tied"] > 1).sum())}
    return y, keep, notes
