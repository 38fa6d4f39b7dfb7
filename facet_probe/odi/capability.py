"""Capability vs flip: Spearman rho between model ability (theta or accuracy) and flip rate, with a
bootstrap interval over models (each replicate also draws theta from its posterior when given). The flip rate
per model is the mean5 value the paper's Table 1 prints (`report.table1.model_flips`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from facet_probe.facets import MAIN_FACETS
from facet_probe.judge.tables import Table, item_flips
from facet_probe.metrics.flips import CELL_KEYS, item_metrics, paper_tables
from facet_probe.report.table1 import model_flips
from facet_probe.store.reading import ItemKey

_RENAMES = {"flip": "flip_rate", "flip_lo": "flip_rate_lo", "flip_hi": "flip_rate_hi"}


def model_flip_rates(frame: pd.DataFrame, items: dict[ItemKey, dict] | None = None,
                     semantic: Table = None) -> pd.DataFrame:
    """Per model, the flip rate Table 1 prints in its mean5 column, with its interval and `flip_source`: repeat
    0, the items the image-set screen drops (`items`: the runs' item records) left out, an item's flip the
    primary judge's sem-flip where `semantic` (the judges' semantic_flip table) judged it, else the exact
    any_flip (a parse error its own answer); dataset means, then facets, then the main facets the frame holds
    (all its facets when it holds none of them). Accuracy is aggregated the same way (a parse error wrong)."""
    from facet_probe.report.screening import screen_trials  # the report's screen, imported when used

    kept, _ = screen_trials(frame, items or {})
    flips = item_flips(item_metrics(kept), semantic)
    held = set(flips["facet"])
    facets = tuple(f for f in MAIN_FACETS if f in held) or tuple(sorted(held))
    per_model = model_flips(flips, main_facets=facets).rename(columns=_RENAMES)
    if "correct" in frame:
        cells = flips.groupby(CELL_KEYS, observed=True)["accuracy"].mean().reset_index()
        accuracy = paper_tables(cells, main_facets=facets, metrics=["accuracy"]).model_main
        per_model = per_model.merge(accuracy[["model", "accuracy"]], on="model", how="left")
    return per_model


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
