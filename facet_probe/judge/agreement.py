"""Agreement statistics over judged answers: semantic flip rate per item and Cohen's kappa between judges."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import pandas as pd

from facet_probe.judge.protocol import VERDICTS


def cohens_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels for the same cases (nan when chance agreement is total)."""
    if len(a) != len(b):
        raise ValueError(f"two raters need the same cases, got {len(a)} and {len(b)} labels")
    n = len(a)
    if n == 0:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    cats = set(a) | set(b)
    expected = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in cats)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else float("nan")
    return (observed - expected) / (1 - expected)


CASE_COLUMNS = ["judge", "model", "facet", "dataset", "item_id", "repeat_idx"]
FLIP_COLUMNS = [*CASE_COLUMNS, "protocol", "set_verdict", *(f"n_{c}" for c in VERDICTS), "n_judged",
                "sem_flip_set", "sem_flip_answers", "unreadable", "n_answers_cut"]


def semantic_flip(judged: pd.DataFrame) -> pd.DataFrame:
    """Per case (judge, model, facet, dataset, item, repeat): the set verdict and `sem_flip_set`, 1 when it is
    B or C and 0 when A, D or "?" (a cell's mean is FACET-PROBE v0.0.1's sem_flip = (B + C) / n, D and "?"
    counted in n), NaN when the reply was unreadable and is retried (left out); from per-answer verdicts, their
    counts and `sem_flip_answers`, the share judged B or C; `unreadable` (its judge replies with no verdict) and
    `n_answers_cut` (answers sent cut to their tail)."""
    if judged.empty:
        return pd.DataFrame(columns=FLIP_COLUMNS)
    frame = judged.copy()
    for col in ("facet", "dataset", "protocol", "set_verdict"):
        if col not in frame:
            frame[col] = None
    for col in ("unreadable", "answer_cut"):
        frame[col] = frame[col].fillna(False).astype(bool) if col in frame else False
    if "repeat_idx" not in frame:
        frame["repeat_idx"] = 0
    frame[["facet", "dataset"]] = frame[["facet", "dataset"]].astype(object).where(
        frame[["facet", "dataset"]].notna(), "")
    for verdict in VERDICTS:
        frame[f"n_{verdict}"] = frame["verdict"] == verdict
    frame["n_judged"] = frame["verdict"].notna()
    # a reply with no verdict counts once per judgment (a combined report may hold a case from several folders)
    replies = frame["judgment_key"] if "judgment_key" in frame else pd.Series("one", index=frame.index)
    frame["unreadable_key"] = replies.where(frame["unreadable"])
    cases = frame.groupby(CASE_COLUMNS, sort=True, dropna=False)
    out = cases[[*(f"n_{c}" for c in VERDICTS), "n_judged", "answer_cut"]].sum().astype(int)
    out = out.rename(columns={"answer_cut": "n_answers_cut"})
    out["protocol"] = cases["protocol"].first(skipna=False)
    label = cases["set_verdict"].first()  # the case's first set verdict given
    out["set_verdict"] = label.where(label.notna(), None)
    out["sem_flip_set"] = label.isin(["B", "C"]).astype(float).where(label.notna() & (label != ""))
    out["sem_flip_answers"] = (out["n_B"] + out["n_C"]) / out["n_judged"].where(out["n_judged"] > 0)
    out["unreadable"] = cases["unreadable_key"].nunique()
    return out.reset_index()[FLIP_COLUMNS]


def _kappa_row(j1: str, j2: str, a: list, b: list) -> dict:
    """n, raw agreement, kappa on the labels and kappa on flip (B or C) / no flip."""
    flip_a = [v in ("B", "C") for v in a]
    flip_b = [v in ("B", "C") for v in b]
    return {
        "n": len(a),
        "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else None,
        "kappa": cohens_kappa(a, b),
        "kappa_flip": cohens_kappa(flip_a, flip_b),
    }


def judge_agreement(judged: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa between every pair of judges: on the set verdicts of the cases both judged (any two
    protocols) and, where both gave per-answer verdicts, on the answers (`*_answers`)."""
    columns = ["judge_1", "judge_2", "n", "agreement", "kappa", "kappa_flip",
               "n_answers", "agreement_answers", "kappa_answers", "kappa_flip_answers"]
    out = []
    flips = semantic_flip(judged)
    flips = flips[flips["set_verdict"].notna()]
    answers = judged[judged["verdict"].notna()]
    case = CASE_COLUMNS[1:]
    for j1, j2 in combinations(sorted(judged["judge"].dropna().unique()), 2):
        sets = flips[flips["judge"] == j1].merge(flips[flips["judge"] == j2], on=case, suffixes=("_1", "_2"))
        row = {"judge_1": j1, "judge_2": j2,
               **_kappa_row(j1, j2, sets["set_verdict_1"].tolist(), sets["set_verdict_2"].tolist())}
        both = answers[answers["judge"] == j1].merge(
            answers[answers["judge"] == j2], on="trial_key", suffixes=("_1", "_2"))
        per = _kappa_row(j1, j2, both["verdict_1"].tolist(), both["verdict_2"].tolist())
        row.update({f"{k}_answers": v for k, v in per.items()})
        out.append(row)
    return pd.DataFrame(out, columns=columns)
