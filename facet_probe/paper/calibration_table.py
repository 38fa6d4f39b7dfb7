"""`table-calibration`: stated vs realised order stability under our protocol (facet_probe/scoring/stability.py).

Per trial, realised stability is the share of the item's other orderings (repeat 0) whose answer equals this
trial's (a parse error equals nothing); mismatch = stated - realised (positive: overconfident). An item's value
is the mean over its trials that stated one; a cell's is the mean over its items with the one interval rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.flips import CELL_KEYS, ITEM_KEYS, bootstrap_means, cell_rng, item_interval
from facet_probe.paper import inputs, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput

METRICS = ("stated", "realised", "mismatch")
#: which of them is a share of events (realised stability: orderings that kept the answer), where a degenerate
#: bootstrap falls back to Wilson; a stated probability and a difference are not
SHARES = (False, True, False)


def realised_stability(answers: pd.Series) -> pd.Series:
    """Per trial of one item: the share of the other orderings' answers equal to its own."""
    values = answers.astype(str).to_numpy()
    ok = values != PARSE_ERROR
    same = (values[:, None] == values[None, :]) & ok[:, None] & ok[None, :]
    n = len(values)
    return pd.Series((same.sum(axis=1) - ok) / max(n - 1, 1), index=answers.index)


def item_calibration(trials: pd.DataFrame) -> pd.DataFrame:
    """Per item: mean stated and realised stability over its trials that stated one, their difference, and
    how many of its trials stated one."""
    first = trials[trials["repeat_idx"].fillna(0) == 0].copy()
    first["realised"] = first.groupby(ITEM_KEYS, group_keys=False)["answer_normalized"].apply(realised_stability)
    first["stated"] = (pd.to_numeric(first["stated_stability"], errors="coerce") if "stated_stability" in first
                       else np.nan)  # trials from before the protocol existed state none
    stated = first.dropna(subset=["stated"])
    out = stated.groupby(ITEM_KEYS, sort=True)[["stated", "realised"]].mean()
    out["mismatch"] = out["stated"] - out["realised"]
    out["n_stated"] = stated.groupby(ITEM_KEYS, sort=True).size()
    out["n_trials"] = first.groupby(ITEM_KEYS, sort=True).size().reindex(out.index)
    return out.reset_index()


def calibration_table(items: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per cell: items with a statement, share of trials that stated one, mean stated, realised and mismatch
    with 95% item-bootstrap intervals."""
    rows = []
    for cell, g in items.groupby(CELL_KEYS, sort=True):
        values = g[list(METRICS)].to_numpy(float)
        lo, hi = item_interval(values, bootstrap_means(values, n_boot, cell_rng(seed, cell)), shares=SHARES)
        row = dict(zip(CELL_KEYS, cell, strict=True), n_items=len(g),
                   stated_share=float(g["n_stated"].sum() / g["n_trials"].sum()))
        for j, name in enumerate(METRICS):
            row |= {name: float(np.nanmean(values[:, j])), f"{name}_lo": float(lo[j]), f"{name}_hi": float(hi[j])}
        rows.append(row)
    return pd.DataFrame(rows)


def table_calibration(ctx: Inputs) -> list[Path]:
    """Stated vs realised order stability (our protocol, `prompt.calibration=true`): per cell the mean stated
    stability, the realised one and their mismatch with intervals."""
    folders = [f for f in inputs.run_folders(ctx.paths) if inputs.run_setting(f, "prompt.calibration") is True]
    if not folders:
        raise MissingInput("table-calibration needs runs with prompt.calibration=true (our stated-stability "
                           "protocol; offline: python -m facet_probe model=always_first_stating prompt.calibration=true)")
    items = item_calibration(inputs.read_trials(folders))
    if items.empty:
        raise MissingInput("the calibration runs' replies state no stability (no 'Stability: p%' line parsed)")
    table = calibration_table(items, ctx.n_boot, ctx.seed)
    caption = ("Our order-stability protocol (the paper's 4-turn confidence protocol is unreleased): after its "
               "answer the model states the probability that the answer survives a reordering; realised = the "
               "share of the item's other orderings with the same answer; mismatch = stated - realised (positive: "
               "overconfident); means over items with 95% item-bootstrap intervals (the paper: mismatch 8.8-62.1 pp "
               "on MedXpertQA).")
    files = render.write_table(table, ctx.out, "table_calibration", caption)
    files += render.write_table(items, ctx.out, "table_calibration_items", "Per item: stated, realised, mismatch.")
    return files
