"""The judge join: what the LLM judges said about a report's trials, in its numbers. Their semantic flip per cell
in summary.csv, and Table 1's tables (facet_model.csv, model_main.csv, panel.csv) with a judged item's flip the
primary judge's sem-flip."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from facet_probe.judge.tables import Table, flip_sources, item_flips, judged_cells, semantic_cases
from facet_probe.metrics.flips import CELL_KEYS, Metrics, PaperTables, group_intervals, paper_tables


def add_semantic_flip(summary: pd.DataFrame, trials: pd.DataFrame, semantic: Table) -> pd.DataFrame:
    """Cell means of the LLM judge's semantic flip per judge, when the trials were judged (`semantic`: the
    judge's semantic_flip table or its CSV): `sem_flip_set_<judge>` (FACET-PROBE v0.0.1's (B + C) / n over set
    verdicts) and, from per-answer verdicts, `sem_flip_answers_<judge>` (share of answers judged B or C);
    repeat 0's cases, as for flips (`judge.tables.semantic_cases`)."""
    mine = semantic_cases(semantic, trials)
    if mine.empty:
        return summary
    out = summary
    for col in ("sem_flip_set", "sem_flip_answers"):
        per_cell = mine.groupby(CELL_KEYS + ["judge"])[col].mean().unstack("judge").dropna(axis=1, how="all")
        if per_cell.empty:
            continue
        per_cell.columns = [f"{col}_{j}" for j in per_cell.columns]
        out = out.merge(per_cell.reset_index(), on=CELL_KEYS, how="left")
    return out


def judged_paper_tables(metrics: Metrics, semantic: Table, n_boot: int, seed: int) -> PaperTables:
    """Table 1's tables of the report's cells, a judged item's flip the judge's sem-flip (`judge.tables.item_flips`);
    facet_model.csv says which source each row's flip is (`flip_source`) and carries its intervals."""
    flips = item_flips(metrics.items, semantic)
    cells = judged_cells(metrics.cells, flips)
    paper = paper_tables(cells)
    return replace(paper, facet_model=with_facet_model_ci(
        paper.facet_model.merge(flip_sources(cells), on=["model", "facet"]), flips, n_boot, seed))


def with_facet_model_ci(facet_model: pd.DataFrame, flips: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """facet_model.csv with CIs of its flip rate and accuracy (`metrics.flips.group_intervals` over `item_flips`:
    a judged item's flip is the judge's sem-flip), the intervals Table 1 prints for the same cells."""
    ci = group_intervals(flips, ["model", "facet"], metrics=("flip", "accuracy"), n_boot=n_boot, seed=seed)
    return facet_model.merge(ci.rename(columns={"flip_lo": "any_flip_lo", "flip_hi": "any_flip_hi"}),
                             on=["model", "facet"], how="left")
