"""What a judged run changes in its report: the primary judge's sem-flip as the cell flip of the paper
tables, its gold match as `correct` of judged trials, the agreement between judges, and the judge-free
gold-anchor cross-check of sem-flip."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from facet_probe.metrics import CELL_KEYS, ITEM_KEYS, item_metrics
from facet_probe.scoring import Score, with_judge_verdict
from facet_probe.trials import PARSE_ERROR

#: The paper's primary judge; with several judges and none of these, the first by name is primary.
PRIMARY_JUDGES = ("gemini_pro",)
SEM_FLIP = "sem_flip_set_"
EXACT = "exact_match"


def primary_judge(names: Iterable[str]) -> str | None:
    """The judge whose numbers the tables carry: a paper primary judge if it ran, else the first by name."""
    names = sorted(set(names))
    return next((j for j in PRIMARY_JUDGES if j in names), names[0] if names else None)


def judged_cells(cells: pd.DataFrame, summary: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Cells whose flip is the primary judge's sem-flip ((B + C) / n, as the paper's Table 1) where that
    judge judged the cell, else the exact-match flip; `flip_source` names which."""
    judge = primary_judge(c[len(SEM_FLIP):] for c in summary if c.startswith(SEM_FLIP))
    out = cells.assign(flip_source=EXACT)
    if judge is None:
        return out
    sem = summary[keys + [SEM_FLIP + judge]].dropna()
    out = out.merge(sem, on=keys, how="left")
    judged = out[SEM_FLIP + judge].notna()
    out.loc[judged, "any_flip"] = out.loc[judged, SEM_FLIP + judge]
    out.loc[judged, "flip_source"] = SEM_FLIP + judge
    return out.drop(columns=[SEM_FLIP + judge])


def flip_sources(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (model, facet): where its flip comes from (one source, or "mixed" across its datasets)."""
    by = cells.groupby(["model", "facet"], sort=True)["flip_source"]
    return by.agg(lambda s: s.iloc[0] if s.nunique() == 1 else "mixed").reset_index()


def with_gold_match(trials: pd.DataFrame, judgments_csv: Path) -> pd.DataFrame:
    """Trials whose `correct` is the primary judge's gold match where it gave one (`with_judge_verdict`:
    a parse error stays wrong, the score kind becomes `judge`); the others as they are."""
    if not judgments_csv.is_file() or trials.empty:
        return trials
    judged = pd.read_csv(judgments_csv, keep_default_na=False, na_values=[""])
    if judged.empty or "gold_match" not in judged:
        return trials
    judged = judged[judged["gold_match"].notna()]
    judge = primary_judge(judged["judge"].astype(str))
    if judge is None:
        return trials
    gold = judged[judged["judge"] == judge].drop_duplicates("trial_key", keep="last")
    gold = dict(zip(gold["trial_key"], gold["gold_match"].map(lambda v: str(v).lower() == "true"), strict=True))
    hit = trials["trial_key"].isin(gold)
    if not hit.any():
        return trials
    out = trials.copy()
    for i in out.index[hit]:
        row = out.loc[i]
        score = with_judge_verdict(Score(row.get("answer_raw"), str(row.get("answer_normalized") or PARSE_ERROR),
                                         str(row.get("gold_normalized") or ""), bool(row.get("correct")),
                                         str(row.get("score_kind")), str(row.get("parse_status"))),
                                   gold[row["trial_key"]])
        out.at[i, "correct"], out.at[i, "score_kind"] = score.correct, score.score_kind
    return out


def agreement_table(path: Path) -> pd.DataFrame | None:
    """judge_agreement.csv's kappas (set verdicts, and per answer where both judges gave them), if any."""
    if not path.is_file():
        return None
    table = pd.read_csv(path)
    return None if table.empty else table


def gold_anchor(exact_trials: pd.DataFrame, semantic_csv: Path) -> pd.DataFrame | None:
    """The judge-free cross-check of sem-flip (the paper's MMQA gold anchor): per judged cell and judge, the
    share of items whose exact-match correctness against the gold changes across orderings, beside the
    judge's sem-flip on the same items and their difference in points. None when nothing was judged."""
    if not semantic_csv.is_file() or exact_trials.empty:
        return None
    sem = pd.read_csv(semantic_csv)
    if sem.empty or not {"facet", "dataset", "sem_flip_set"} <= set(sem):
        return None
    sem = sem[sem["facet"].notna()]
    if "repeat_idx" in sem:  # one case per item, the lowest repeat (as the flip metrics)
        sem = sem[sem["repeat_idx"] == sem.groupby(ITEM_KEYS + ["judge"])["repeat_idx"].transform("min")]
    items = item_metrics(exact_trials)
    known = items["accuracy"].notna()
    items = items[known].assign(gold_anchor_flip=lambda f: ((f["accuracy"] > 0) & (f["accuracy"] < 1)).astype(float))
    both = sem.merge(items[ITEM_KEYS + ["gold_anchor_flip"]], on=ITEM_KEYS)
    if both.empty:
        return None
    table = (both.groupby(CELL_KEYS + ["judge"], sort=True)
             .agg(n_items=("item_id", "nunique"), sem_flip_set=("sem_flip_set", "mean"),
                  gold_anchor_flip=("gold_anchor_flip", "mean")).reset_index())
    table["sem_minus_anchor_pp"] = 100 * (table["sem_flip_set"] - table["gold_anchor_flip"])
    return table
