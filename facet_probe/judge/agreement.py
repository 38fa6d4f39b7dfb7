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


def semantic_flip(judged: pd.DataFrame) -> pd.DataFrame:
    """Per (judge, model, item): verdict counts and the semantic flip rate, share of B or C."""
    rows = judged[judged["verdict"].notna()]
    if rows.empty:
        return pd.DataFrame(
            columns=["judge", "model", "item_id", *(f"n_{c}" for c in VERDICTS), "n_judged", "semantic_flip"]
        )
    counts = (
        rows.groupby(["judge", "model", "item_id"])["verdict"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=list(VERDICTS), fill_value=0)
    )
    counts.columns = [f"n_{c}" for c in counts.columns]
    counts["n_judged"] = counts.sum(axis=1)
    counts["semantic_flip"] = (counts["n_B"] + counts["n_C"]) / counts["n_judged"]
    return counts.reset_index()


def judge_agreement(judged: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa and raw agreement between every pair of judges, on the answers both judged."""
    out = []
    rows = judged[judged["verdict"].notna()]
    for j1, j2 in combinations(sorted(rows["judge"].unique()), 2):
        both = rows[rows["judge"] == j1].merge(
            rows[rows["judge"] == j2], on="trial_key", suffixes=("_1", "_2")
        )
        a, b = both["verdict_1"].tolist(), both["verdict_2"].tolist()
        flip_a = [v in ("B", "C") for v in a]
        flip_b = [v in ("B", "C") for v in b]
        out.append(
            {
                "judge_1": j1,
                "judge_2": j2,
                "n": len(both),
                "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(both)
                if len(both)
                else None,
                "kappa": cohens_kappa(a, b),
                "kappa_flip": cohens_kappa(flip_a, flip_b),
            }
        )
    return pd.DataFrame(out, columns=["judge_1", "judge_2", "n", "agreement", "kappa", "kappa_flip"])
