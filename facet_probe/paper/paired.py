"""One setting against another on the same items (CoT vs direct, a prompt mitigation vs none): per cell the
flip and accuracy under each, and the difference with a paired item-bootstrap interval (both settings'
answers to an item are resampled together)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from facet_probe.metrics.flips import CELL_KEYS, ITEM_KEYS, bootstrap_means, cell_rng, item_interval

#: The per-item columns compared (from the report's item metrics: `flip` is the judged flip where judged).
COMPARED = ("flip", "accuracy")


def paired_cells(items: pd.DataFrame, baseline, other, n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> pd.DataFrame:
    """Per cell present under both settings (the `setting` column): n paired items, each compared metric under
    the baseline and the other setting and their difference (other - baseline), each with its interval."""
    base = items[items["setting"] == baseline].set_index(ITEM_KEYS)[list(COMPARED)]
    alt = items[items["setting"] == other].set_index(ITEM_KEYS)[list(COMPARED)]
    both = base.add_suffix("_base").join(alt.add_suffix("_other"), how="inner").reset_index()
    rows = []
    for cell, g in both.groupby(CELL_KEYS, sort=True):
        columns, names = [], []
        for metric in COMPARED:
            b, o = g[f"{metric}_base"].to_numpy(float), g[f"{metric}_other"].to_numpy(float)
            columns += [b, o, o - b]
            names += [f"{metric}_baseline", f"{metric}_other", f"{metric}_difference"]
        values = np.column_stack(columns)
        boot = bootstrap_means(values, n_boot, cell_rng(seed, cell))
        lo, hi = item_interval(values, boot, level)
        row = dict(zip(CELL_KEYS, cell, strict=True), baseline=str(baseline), other=str(other), n_items=len(g))
        for j, name in enumerate(names):
            row.update({name: float(np.nanmean(values[:, j])), f"{name}_lo": float(lo[j]),
                        f"{name}_hi": float(hi[j])})
        rows.append(row)
    return pd.DataFrame(rows)
