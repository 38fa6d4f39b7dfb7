"""Posterior -> the ODI tables: per-item parameters, theta, the per-facet decomposition (Table 2) and the
appendix's posterior intervals.

Two |delta| per facet. `delta_abs_mean` (paper variant) is the reference's Table 2 quantity (FACET-PROBE v0.0.1
`irt._per_facet_summary`): the mean over the facet's observed (dataset, ordering) cells of |posterior mean of
delta|, |E delta|, with `delta_ratio_vs_option` its ratio to option_order's. `mean_abs_delta` (both variants) is
ours: the posterior mean of the facet's mean |delta|, E mean|delta|, always reported with an interval.

A posterior of mean |delta| never reaches zero (a mean of absolute values is positive in every draw), so its plain
quantiles exclude "no bias" even when the data hold none: the reference's fit reports 0.006-0.018 on null data.
The interval used here is the *folded simultaneous band*: a 95% simultaneous credible band for the signed deltas of
the facet, mapped through mean |.|. It contains 0 exactly when every signed interval contains 0, and it covers the
true mean |delta| whenever the band covers the signed deltas (at least 95%).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from facet_probe.core.extras import missing
from facet_probe.odi.data import OdiData

try:  # the [odi] extra: without it, one line naming the pip command (facet_probe.core.extras)
    import arviz as az
except ModuleNotFoundError as exc:
    raise missing(exc, "odi", "facet_probe.odi") from exc

REFERENCE_FACET = "option_order"
LEVEL = 0.95
HDI_PROB = 0.89  # the reference's appendix intervals (artifacts/odi/posterior_intervals.csv)


def draws(idata: az.InferenceData, name: str) -> np.ndarray:
    """Posterior draws of a variable with chains stacked first: shape (S, *dims)."""
    arr = idata["posterior"][name].values
    return arr.reshape(-1, *arr.shape[2:])


def interval_frame(samples: np.ndarray, index, prefix: str = "") -> pd.DataFrame:
    """Mean, sd, 2.5% and 97.5% quantiles of (S, n) draws, one row per column."""
    lo, hi = np.quantile(samples, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return pd.DataFrame({f"{prefix}mean": samples.mean(0), f"{prefix}sd": samples.std(0),
                         f"{prefix}q2.5": lo, f"{prefix}q97.5": hi}, index=index)


def item_table(idata: az.InferenceData, data: OdiData) -> pd.DataFrame:
    """beta, alpha and sigma_pi per item with mean, sd and 95% interval."""
    parts = [interval_frame(draws(idata, v), data.items, f"{v}_") for v in ("beta", "alpha", "sigma_pi")]
    table = pd.concat(parts, axis=1)
    table.insert(0, "cell", np.asarray(data.cells)[data.item_cell])
    table.insert(0, "facet", np.asarray(data.facets)[data.item_facet])
    table.index.name = "item"
    return table.reset_index()


def theta_table(idata: az.InferenceData, data: OdiData) -> pd.DataFrame:
    """theta per model with its interval, beside the observed share of y = 1 (the outcome's rate)."""
    table = interval_frame(draws(idata, "theta"), data.models, "theta_")
    rate = np.bincount(data.obs_model, weights=data.successes, minlength=len(data.models)) / np.bincount(
        data.obs_model, weights=data.trials, minlength=len(data.models))
    table[f"observed_{data.outcome}_rate"] = rate
    table.index.name = "model"
    return table.reset_index().sort_values("theta_mean", ascending=False, ignore_index=True)


def simultaneous_band(samples: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Per-column quantile bounds such that a `level` share of draws lies inside in *every* column."""
    lo_a, hi_a = 0.0, 1.0 - level  # per-column tail mass: 0 = full range, 1 - level = marginal band
    for _ in range(30):
        a = (lo_a + hi_a) / 2
        lo, hi = np.quantile(samples, [a / 2, 1 - a / 2], axis=0)
        inside = ((samples >= lo) & (samples <= hi)).all(axis=1).mean()
        lo_a, hi_a = (a, hi_a) if inside >= level else (lo_a, a)
    return tuple(np.quantile(samples, [lo_a / 2, 1 - lo_a / 2], axis=0))


def folded_interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Interval for mean_j |delta_j| from the simultaneous band of the signed (S, J) draws."""
    lo, hi = simultaneous_band(samples, level)
    nearest = np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi)))
    return float(nearest.mean()), float(np.maximum(np.abs(lo), np.abs(hi)).mean())


def observed_cell_orderings(data: OdiData) -> np.ndarray:
    """(C, K) True where some item of cell d has a trial at ordering index k (the reference's delta cells)."""
    seen = np.zeros((len(data.cells), data.n_orderings), dtype=bool)
    seen[data.item_cell[data.pair_item], data.pair_ordering] = True
    return seen


def facet_deltas(idata: az.InferenceData, data: OdiData, variant: str) -> dict[str, np.ndarray]:
    """Signed systematic effects per facet as (S, J) draws: delta[d, k] over the observed (cell, ordering)
    pairs (paper; an unobserved one is its prior alone) or delta_position[f, p]."""
    if variant == "paper":
        delta = draws(idata, "delta")  # (S, C, K)
        seen = observed_cell_orderings(data)
        return {f: delta[:, seen & (data.cell_facet == j)[:, None]] for j, f in enumerate(data.facets)}
    delta = draws(idata, "delta_position")  # (S, F, 3)
    return {f: delta[:, j, :] for j, f in enumerate(data.facets)}


def decomposition_table(idata: az.InferenceData, data: OdiData, variant: str) -> pd.DataFrame:
    """Per facet: n items; sigma_pi_median (over items of the posterior mean) and quartiles, the reference's; the
    per-draw median of sigma_pi with its 95% interval; the reference's |E delta| (paper variant); our mean |delta|
    with its folded interval; ratios to option_order."""
    sigma = draws(idata, "sigma_pi")  # (S, I)
    sigma_mean = sigma.mean(0)
    deltas = facet_deltas(idata, data, variant)
    located = data.item_located() if variant == "positional" else None
    rows, median_draws, abs_draws = [], {}, {}
    for j, facet in enumerate(data.facets):
        mask = data.item_facet == j
        median_draws[facet] = np.median(sigma[:, mask], axis=1)
        abs_draws[facet] = np.abs(deltas[facet]).mean(axis=1)
        lo, hi = folded_interval(deltas[facet])
        rows.append({"facet": facet, "n_items": int(mask.sum()),
                     "n_located": int(located[mask].sum()) if located is not None else None,
                     "sigma_pi_median": float(np.median(sigma_mean[mask])),
                     "sigma_pi_q25": float(np.quantile(sigma_mean[mask], 0.25)),
                     "sigma_pi_q75": float(np.quantile(sigma_mean[mask], 0.75)),
                     **median_and_interval(median_draws[facet], "sigma_pi_draw_median"),
                     "delta_abs_mean": float(np.abs(deltas[facet].mean(axis=0)).mean()),  # |E delta|
                     "mean_abs_delta": float(abs_draws[facet].mean()),  # E mean|delta|
                     "abs_delta_lo": lo, "abs_delta_hi": hi, "bias_credible": bool(lo > 0)})
    table = pd.DataFrame(rows)
    if variant == "paper":
        table = table.drop(columns="n_located")
        table["delta_ratio_vs_option"] = ratio_to_option(table, "delta_abs_mean")
    else:  # the reference's |E delta| is of delta[d, k]; |E delta_position| is another quantity
        table = table.drop(columns="delta_abs_mean")
    return _add_ratios(table, median_draws)


def ratio_to_option(table: pd.DataFrame, column: str) -> pd.Series:
    """`column` over option_order's (NaN without an option_order row)."""
    ref = table.loc[table["facet"] == REFERENCE_FACET, column]
    return table[column] / (ref.iloc[0] if len(ref) else np.nan)


def _add_ratios(table: pd.DataFrame, median_draws: dict[str, np.ndarray]) -> pd.DataFrame:
    """Ratios to option_order: sigma_pi median (the reference's), the per-draw median's (posterior median and
    interval) and mean |delta| (folded interval)."""
    ratio_draws = "ratio_sigma_pi_draw_median"
    cols = ["ratio_sigma_pi", ratio_draws, f"{ratio_draws}_lo", f"{ratio_draws}_hi",
            "ratio_abs_delta", "ratio_abs_delta_lo", "ratio_abs_delta_hi"]
    if REFERENCE_FACET not in set(table["facet"]):
        return table.assign(**{c: np.nan for c in cols})
    ref = table.set_index("facet").loc[REFERENCE_FACET]
    out = table.copy()
    out["ratio_sigma_pi"] = ratio_to_option(out, "sigma_pi_median")  # the reference's sigma_ratio_vs_option
    ratios = pd.DataFrame([median_and_interval(median_draws[f] / median_draws[REFERENCE_FACET], ratio_draws)
                           for f in out["facet"]], index=out.index)
    out[ratios.columns] = ratios
    out["ratio_abs_delta"] = ratio_to_option(out, "mean_abs_delta")
    with np.errstate(divide="ignore"):
        out["ratio_abs_delta_lo"] = out["abs_delta_lo"] / ref["abs_delta_hi"]
        out["ratio_abs_delta_hi"] = np.where(ref["abs_delta_lo"] > 0, out["abs_delta_hi"] / ref["abs_delta_lo"],
                                             np.inf)
    return out


def median_and_interval(samples: np.ndarray, name: str, hdi: bool = False) -> dict[str, float]:
    """`name`: the posterior median of 1-D draws; `name_lo`, `name_hi`: their central LEVEL interval, or with
    `hdi` their shortest HDI_PROB interval (arviz.hdi). Either holds the median (it holds over half the draws)."""
    lo, hi = az.hdi(samples, hdi_prob=HDI_PROB) if hdi else np.quantile(samples, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {name: float(np.median(samples)), f"{name}_lo": float(lo), f"{name}_hi": float(hi)}


def posterior_interval_table(idata: az.InferenceData, data: OdiData, variant: str) -> pd.DataFrame:
    """The reference's appendix table per facet: the per-draw median of sigma_pi over the facet's items and (paper
    variant) the facet's sigma_delta, each as its posterior median with the shortest 89% interval (arviz.hdi)."""
    sigma = draws(idata, "sigma_pi")  # (S, I)
    sigma_delta = draws(idata, "sigma_delta") if variant == "paper" else None  # (S, F)
    rows = []
    for j, facet in enumerate(data.facets):
        mask = data.item_facet == j
        row = {"facet": facet, "n_items": int(mask.sum()),
               **median_and_interval(np.median(sigma[:, mask], axis=1), "sigma_pi_draw_median", hdi=True)}
        if sigma_delta is not None:
            row |= median_and_interval(sigma_delta[:, j], "sigma_delta_median", hdi=True)
        rows.append(row)
    return pd.DataFrame(rows).assign(hdi_prob=HDI_PROB)


def signed_delta_table(idata: az.InferenceData, data: OdiData, variant: str) -> pd.DataFrame:
    """Every signed systematic effect with its 95% interval (the positional variant's main read-out)."""
    name = "delta" if variant == "paper" else "delta_position"
    summary = az.summary(idata, var_names=[name], kind="stats", hdi_prob=LEVEL, round_to="none")
    return summary.rename_axis("parameter").reset_index()
