"""What a judged run changes in its report: the primary judge's sem-flip as the item flip of the paper
tables, its gold match as `correct` of judged trials, the agreement between judges, and the judge-free
gold-anchor cross-check of sem-flip. Every function takes the judge's tables as frames (a combined report
concatenates its run folders') or as the CSV files a judged run folder holds."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pandas as pd

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.judge.protocol import UNREADABLE
from facet_probe.metrics.flips import CELL_KEYS, ITEM_KEYS, item_metrics
from facet_probe.scoring.score import Score, with_judge_verdict

#: The paper's primary judge; with several judges and none of these, the first by name is primary.
PRIMARY_JUDGES = ("gemini_pro",)
SEM_FLIP = "sem_flip_set_"
EXACT = "exact_match"
#: A judge table: a frame, a CSV file (absent: nothing judged) or None.
Table: TypeAlias = pd.DataFrame | Path | None


def primary_judge(names: Iterable[str]) -> str | None:
    """The judge whose numbers the tables carry: a paper primary judge if it ran, else the first by name."""
    names = sorted(set(names))
    return next((j for j in PRIMARY_JUDGES if j in names), names[0] if names else None)


def combined_source(sources: Iterable[str]) -> str:
    """Where an aggregate's flip comes from: its one source, or its sources joined by '+' (a model whose
    mixed-modality cells are judged and whose other facets are exact: `exact_match+sem_flip_set_<judge>`)."""
    return "+".join(sorted({part for s in sources if isinstance(s, str) for part in s.split("+") if part}))


def as_frame(table: Table) -> pd.DataFrame | None:
    """A judge table as a frame (a CSV read with empty fields as missing); None when absent or empty."""
    if isinstance(table, Path):
        keys = {c: str for c in (*ITEM_KEYS, "judge", "trial_key")}
        table = pd.read_csv(table, keep_default_na=False, na_values=[""], dtype=keys) if table.is_file() else None
    return None if table is None or table.empty else table


def semantic_cases(semantic: Table, keys: pd.DataFrame) -> pd.DataFrame:
    """The judge's per-case sem-flips (semantic_flip.csv), one per item and judge: its lowest repeat (as the
    flip metrics); a case stored without facet and dataset (an older table) stands for its item's cells in
    `keys` (frames with the item keys: trials or item metrics). Key columns as strings."""
    judged = as_frame(semantic)
    if judged is None:
        return pd.DataFrame(columns=[*ITEM_KEYS, "judge", "sem_flip_set", "sem_flip_answers"])
    judged = judged.copy()
    if "sem_flip_set" not in judged:  # written before set verdicts: its semantic_flip is the per-answer share
        judged = judged.rename(columns={"semantic_flip": "sem_flip_answers"}).assign(sem_flip_set=np.nan)
    for col in ("facet", "dataset", "sem_flip_answers"):
        if col not in judged:
            judged[col] = np.nan
    for col in (*ITEM_KEYS, "judge"):
        judged[col] = judged[col].map(lambda v: v if pd.isna(v) or v == "" else str(v))
    older = judged["facet"].isna() | judged["facet"].eq("")
    known = keys[ITEM_KEYS].astype(str).drop_duplicates()
    spread = judged[older].drop(columns=["facet", "dataset"]).merge(known, on=["model", "item_id"])
    cases = pd.concat([judged[~older], spread], ignore_index=True)
    if "repeat_idx" in cases and len(cases):  # like the flip metrics: one case per item, the lowest repeat
        repeat = cases["repeat_idx"].fillna(0)
        by = [cases[k] for k in [*ITEM_KEYS, "judge"]]
        cases = cases[repeat == repeat.groupby(by, dropna=False).transform("min")]
    return cases.reset_index(drop=True)


def item_flips(items: pd.DataFrame, semantic: Table) -> pd.DataFrame:
    """Item metrics with Table 1's per-item flip: `flip` is the set sem-flip ((B + C) / n per item) of the
    cell's primary judge (among the judges that judged that cell) where it judged the item, else the exact
    `any_flip` (a parse error its own answer); `flip_source` says which (`sem_flip_set_<judge>` or
    `exact_match`). The report, Table 1 and ODI's capability read item flips through this one rule."""
    out = items.assign(flip=items["any_flip"].astype(float), flip_source=EXACT)
    cases = semantic_cases(semantic, items)
    cases = cases[cases["sem_flip_set"].notna()]
    if cases.empty:
        return out
    primary = cases.groupby(CELL_KEYS)["judge"].agg(primary_judge).rename("primary").reset_index()
    cases = cases.merge(primary, on=CELL_KEYS)
    sem = cases[cases["judge"] == cases["primary"]].drop_duplicates(ITEM_KEYS)
    sem = sem[[*ITEM_KEYS, "judge", "sem_flip_set"]].rename(columns={"judge": "_judge", "sem_flip_set": "_sem"})
    merged = out.merge(sem, on=ITEM_KEYS, how="left")
    hit = merged["_sem"].notna()
    merged.loc[hit, "flip"] = merged.loc[hit, "_sem"].astype(float)
    merged.loc[hit, "flip_source"] = SEM_FLIP + merged.loc[hit, "_judge"]
    return merged.drop(columns=["_judge", "_sem"])


def judged_cells(cells: pd.DataFrame, flips: pd.DataFrame) -> pd.DataFrame:
    """Cells whose flip is the mean of their items' `item_flips` where the judge judged any of them (the
    primary judge's sem-flip, as the paper's Table 1), else the exact-match flip; `flip_source` names which."""
    per_cell = flips.groupby(CELL_KEYS, sort=True).agg(
        _flip=("flip", "mean"), flip_source=("flip_source", combined_source)).reset_index()
    out = cells.merge(per_cell, on=CELL_KEYS, how="left")
    judged = out["flip_source"].notna() & out["flip_source"].ne(EXACT)
    out.loc[judged, "any_flip"] = out.loc[judged, "_flip"]
    out["flip_source"] = out["flip_source"].fillna(EXACT)
    return out.drop(columns=["_flip"])


def flip_sources(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (model, facet): where its flip comes from (`combined_source` over its datasets)."""
    by = cells.groupby(["model", "facet"], sort=True)["flip_source"]
    return by.agg(combined_source).reset_index()


def with_gold_match(trials: pd.DataFrame, judgments: Table) -> pd.DataFrame:
    """Trials whose `correct` is the gold match of their cell's primary judge (among the judges that gave one
    in that cell) where it gave one (`with_judge_verdict`: a parse error stays wrong, the score kind becomes
    `judge`); the others as they are."""
    gold = primary_gold(judgments)
    if gold.empty or trials.empty:
        return trials
    gold = dict(zip(gold["trial_key"], gold["gold_match"].map(lambda v: str(v).lower() == "true"), strict=True))
    hit = trials["trial_key"].isin(gold)
    if not hit.any():
        return trials
    out = trials.copy()
    # the judged rows as plain records (a pandas row lookup per trial took minutes at paper scale)
    fields = ["trial_key", "answer_raw", "answer_normalized", "gold_normalized", "correct", "score_kind", "parse_status"]
    scores = [with_judge_verdict(Score(row.get("answer_raw"), str(row.get("answer_normalized") or PARSE_ERROR),
                                       str(row.get("gold_normalized") or ""), bool(row.get("correct")),
                                       str(row.get("score_kind")), str(row.get("parse_status"))),
                                 gold[row["trial_key"]])
              for row in out.loc[hit, [f for f in fields if f in out]].to_dict("records")]
    out.loc[hit, "correct"] = [score.correct for score in scores]
    out.loc[hit, "score_kind"] = [score.score_kind for score in scores]
    return out


def primary_gold(judgments: Table) -> pd.DataFrame:
    """The judgments whose gold match `with_gold_match` takes: per cell, its primary judge's (among the judges
    that gave one there), the last per trial."""
    judged = as_frame(judgments)
    if judged is None or "gold_match" not in judged:
        return pd.DataFrame(columns=["judge", "trial_key", "gold_match"])
    judged = judged[judged["gold_match"].notna()]
    if judged.empty:
        return judged
    keys = judged[[c for c in CELL_KEYS if c in judged]].astype(str)
    primary = judged["judge"].astype(str).groupby([keys[c] for c in keys]).transform(primary_judge)
    return judged[judged["judge"].astype(str) == primary].drop_duplicates("trial_key", keep="last")


def correct_source(trials: pd.DataFrame, judgments: Table) -> str:
    """Where the trials' `correct` comes from after `with_gold_match`: `gold_match_<judge>` for the trials a
    judge's gold match scores, `exact_match` for the others (`combined_source`)."""
    gold = primary_gold(judgments)
    keys = trials["trial_key"] if "trial_key" in trials else pd.Series(dtype=str)
    judges = gold.loc[gold["trial_key"].isin(keys), "judge"].astype(str).unique()
    scored = int(keys.isin(gold["trial_key"]).sum())
    return combined_source([*(f"gold_match_{j}" for j in judges), *([EXACT] if scored < len(trials) else [])])


def judge_replies(semantic: Table) -> pd.DataFrame | None:
    """Per judge and cell: the cases judged, the judge replies with no readable verdict (`unreadable`: left out
    of the sem-flip mean, or counted in n as "?" under `unreadable=count`, see `counted`) and the answers sent
    cut to their last `max_answer_chars` characters. None when nothing was judged."""
    judged = as_frame(semantic)
    if judged is None:
        return None
    counts = {c: pd.to_numeric(judged[c].replace({"True": 1, "False": 0}), errors="coerce").fillna(0)
              if c in judged else 0 for c in ("unreadable", "n_answers_cut")}  # absent in older tables: none
    table = judged.assign(**counts, counted=judged["set_verdict"].astype(str).eq(UNREADABLE)).groupby([*CELL_KEYS, "judge"], sort=True).agg(
        cases=("item_id", "size"), unreadable=("unreadable", "sum"), counted=("counted", "sum"),
        answers_cut=("n_answers_cut", "sum")).reset_index()
    return table.astype({"unreadable": int, "counted": int, "answers_cut": int})


def agreement_table(agreement: Table) -> pd.DataFrame | None:
    """judge_agreement.csv's kappas (set verdicts, and per answer where both judges gave them), if any."""
    return as_frame(agreement)


def gold_anchor(exact_trials: pd.DataFrame, semantic: Table) -> pd.DataFrame | None:
    """The judge-free cross-check of sem-flip (the paper's MMQA gold anchor): per judged cell and judge, the
    share of items whose exact-match correctness against the gold changes across orderings, beside the
    judge's sem-flip on the same items and their difference in points. None when nothing was judged."""
    if exact_trials.empty:
        return None
    sem = semantic_cases(semantic, exact_trials)
    sem = sem[sem["sem_flip_set"].notna()]
    if sem.empty:
        return None
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
