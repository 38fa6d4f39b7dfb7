"""Capability vs flip: Spearman rho between model ability (theta or accuracy) and flip rate, with a
bootstrap interval over models (each replicate also draws theta from its posterior when given)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from facet_probe.facets import MAIN_FACETS
from facet_probe.metrics import CELL_KEYS, item_metrics, paper_tables

#: Item metrics behind the capability comparison: the flip rate (a parse error counts as its own answer)
#: and accuracy (a parse error is wrong).
_METRICS = {"any_flip": "flip_rate", "accuracy": "accuracy"}


def model_flip_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model, the paper's flip rate and accuracy: repeat 0 only (one answer per ordering), the mean over
    each dataset's items, then over datasets per facet, then over the main facets the frame holds (all its
    facets when it holds none of them); the aggregation of `metrics.paper_tables`."""
    items = item_metrics(frame)
    metrics = [m for m in _METRICS if m != "accuracy" or "correct" in frame]
    cells = items.groupby(CELL_KEYS, observed=True)[metrics].mean().reset_index()
    cells[CELL_KEYS] = cells[CELL_KEYS].astype(str)
    held = set(cells["facet"])
    facets = [f for f in MAIN_FACETS if f in held] or sorted(held)
    per_model = paper_tables(cells, main_facets=facets, metrics=metrics).model_main
    return per_model[["model", *metrics]].rename(columns=_METRICS)


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho per row of (B, M) arrays (average ranks for ties; NaN where a row is constant)."""
    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx -= rx.mean(1, keepdims=True)
    ry -= ry.mean(1, keepdims=True)
    denom = np.sqrt((rx**2).sum(1) * (ry**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(1) / denom


def spearman_bootstrap(capability: np.ndarray, flip: np.ndarray, capability_draws: np.ndarray | None = None,
                       n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict[str, float]:
    """rho with a percentile bootstrap interval; resample models, and a posterior draw per replicate."""
    capability, flip = np.asarray(capability, float), np.asarray(flip, float)
    m = len(flip)
    if m < 3 or len(capability) != m:
        raise ValueError(f"need the same >= 3 models for capability and flip rate, got {len(capability)}, {m}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, m, size=(n_boot, m))
    if capability_draws is None:
        cap = capability[idx]
    else:
        pick = rng.integers(0, capability_draws.shape[0], size=n_boot)
        cap = np.take_along_axis(capability_draws[pick], idx, axis=1)
    rhos = spearman_rows(cap, flip[idx])
    rhos = rhos[np.isfinite(rhos)]
    lo, hi = np.quantile(rhos, [(1 - level) / 2, (1 + level) / 2])
    rho = float(spearman_rows(capability[None], flip[None])[0])
    return {"rho": rho, "rho_lo": float(lo), "rho_hi": float(hi), "n_models": m, "n_boot": int(len(rhos))}
