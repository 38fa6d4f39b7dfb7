"""Capability vs flip: Spearman rho between model ability (theta or accuracy) and flip rate, with a
bootstrap interval over models (each replicate also draws theta from its posterior when given)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from facet_probe.odi.outcome import parsed_mask


def model_flip_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model: flip rate (share of items whose answers differ across orderings; a parse error counts as
    its own answer) and accuracy (mean `correct`)."""
    answers = frame["answer_normalized"].astype(str).where(parsed_mask(frame), "<parse_error>")
    keyed = frame.assign(_answer=answers)
    per_item = keyed.groupby(["model", "facet", "item_id"])["_answer"].nunique() > 1
    flips = per_item.groupby(level="model").mean().rename("flip_rate")
    out = flips.to_frame()
    if "correct" in frame:
        out["accuracy"] = frame.dropna(subset=["correct"]).groupby("model")["correct"].mean().astype(float)
    return out.rename_axis("model").reset_index()


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
