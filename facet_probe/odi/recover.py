"""Parameter recovery: simulate with a known truth, fit, and compare (used by tests and experiments).

Checked for both variants: theta (correlation with the truth), the facet ordering by sigma_pi
(Spearman over facets), item-level coverage. For the positional variant also the signed position
effects and mean |delta| (error, coverage of their 95% intervals). The paper variant's delta is
identified only through its priors, so its recovery is not claimed (its numbers are still reported).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from facet_probe.odi import tables
from facet_probe.odi.data import build_odi_data
from facet_probe.odi.fit import FitSettings, fit, summary
from facet_probe.odi.model import build_model
from facet_probe.odi.outcome import modal_rule_for
from facet_probe.odi.simulate import SimSpec, Simulation, simulate


@dataclass(frozen=True)
class Recovery:
    """What one recovery run measured."""

    metrics: dict
    decomposition: pd.DataFrame
    fit_summary: dict


def coverage(samples: np.ndarray, truth: np.ndarray, level: float = 0.95) -> float:
    """Share of true values inside their central `level` posterior interval ((S, n) draws)."""
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return float(((truth >= lo) & (truth <= hi)).mean())


def compare(sim: Simulation, idata, data, variant: str) -> dict:
    """Recovery metrics of one fit against the simulation's truth."""
    truth = sim.truth
    theta = tables.draws(idata, "theta")
    true_theta = truth["theta"].loc[list(data.models)].to_numpy()
    items = truth["items"].loc[list(data.items)]
    decomposition = tables.decomposition_table(idata, data, variant).set_index("facet")
    true_sigma = truth["sigma_pi_facet"].loc[decomposition.index]
    out = {
        "theta_corr": float(np.corrcoef(theta.mean(0), true_theta)[0, 1]),
        "theta_coverage": coverage(theta, true_theta),
        "beta_coverage": coverage(tables.draws(idata, "beta"), items["beta"].to_numpy()),
        "sigma_pi_item_coverage": coverage(tables.draws(idata, "sigma_pi"), items["sigma_pi"].to_numpy()),
        "sigma_pi_facet_spearman": float(spearmanr(decomposition["sigma_pi_median"], true_sigma).statistic),
        "sigma_pi_facet_order_recovered": bool(
            list(decomposition["sigma_pi_median"].sort_values().index) == list(true_sigma.sort_values().index)),
    }
    if variant == "positional":
        delta = tables.draws(idata, "delta_position")  # (S, F, 3)
        true_delta = truth["delta_position"].loc[list(data.facets)].to_numpy()
        true_abs = truth["mean_abs_delta_position"].loc[decomposition.index]
        inside = (decomposition["abs_delta_lo"] <= true_abs) & (true_abs <= decomposition["abs_delta_hi"])
        out.update({
            "delta_position_coverage": coverage(delta.reshape(len(delta), -1), true_delta.ravel()),
            "delta_position_max_abs_error": float(np.abs(delta.mean(0) - true_delta).max()),
            "abs_delta_max_abs_error": float(np.abs(decomposition["mean_abs_delta"] - true_abs).max()),
            "abs_delta_interval_coverage": float(inside.mean()),
        })
    return out


def run_recovery(spec: SimSpec, variant: str, settings: FitSettings, outcome: str = "correct") -> Recovery:
    """Simulate, fit one variant, and compare with the truth."""
    sim = simulate(spec)
    data = build_odi_data(sim.trials, outcome, sim.facts, positional=variant == "positional",
                          modal_rule=modal_rule_for(variant))
    model = build_model(data, variant)
    started = time.perf_counter()
    idata, wall = fit(model, settings)
    metrics = compare(sim, idata, data, variant)
    metrics["n_trials"] = data.n_trials
    metrics["total_s"] = round(time.perf_counter() - started, 1)
    return Recovery(metrics=metrics, decomposition=tables.decomposition_table(idata, data, variant),
                    fit_summary=summary(idata, wall, settings))
