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
    out = []
    for keys, case in frame.groupby(CASE_COLUMNS, sort=True, dropna=False):
        answers = case["verdict"].dropna()
        counts = {f"n_{c}": int((answers == c).sum()) for c in VERDICTS}
        n_judged = int(len(answers))
        set_label = case["set_verdict"].dropna()
        set_label = set_label.iloc[0] if len(set_label) else None
        out.append({
            **dict(zip(CASE_COLUMNS, keys, strict=True)),
            "protocol": case["protocol"].iloc[0],
            "set_verdict": set_label,
            **counts,
            "n_judged": n_judged,
            "sem_flip_set": float(set_label in ("B", "C")) if set_label else float("nan"),
            "sem_flip_answers": (counts["n_B"] + counts["n_C"]) / n_judged if n_judged else float("nan"),
            "unreadable": _unreadable_replies(case),
            "n_answers_cut": int(case["answer_cut"].sum()),
        })
    return pd.DataFrame(out, columns=FLIP_COLUMNS)


def _unreadable_replies(case: pd.DataFrame) -> int:
    """How many of a case's judge replies held no verdict (one per judgment; a combined report may hold the
    same case from several run folders)."""
    hit = case[case["unreadable"]]
    return int(hit["judgment_key"].nunique()) if "judgment_key" in hit else int(len(hit) > 0)


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
