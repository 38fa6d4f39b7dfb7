"""The ODI item-response models in PyMC: `paper` (reference-compatible) and `positional` (identified).

Both: y[m,i,k] ~ Binomial(n, logistic(alpha_i * (theta_m - beta_i - bias[i,k] - gamma[i,k]))) with
ability theta (sum to zero), difficulty beta (non-centred per facet-dataset cell), discrimination
alpha, and per-item order noise gamma[i,k] = sigma_pi[i] * z (log sigma_pi hierarchical per facet).
- paper: bias = delta[f,d,k] = sigma_delta[f] * z, indexed by ordering *index* k. Only k = 0 (the
  identity) means the same ordering across items, and the mean of delta over k trades off against
  mu_beta[d]: delta is identified by its priors alone.
- positional: bias = sum_p w[i,k,p] * delta_position[f,p], p in (first, middle, last) the display
  position of the gold / supporting component, with delta_position summing to zero over p within a
  facet (so it cannot absorb difficulty) and a fixed-scale prior (no shrinkage towards "no bias").
The likelihood is evaluated on aggregated (model, item, ordering) counts with one gather per term.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from facet_probe.odi.data import OdiData
from facet_probe.odi.positions import POSITIONS

VARIANTS = ("paper", "positional")


@dataclass(frozen=True)
class Priors:
    """Prior scales; the defaults are the reference's (paper) values."""

    theta_sd: float = 1.0
    mu_beta_sd: float = 1.0
    sigma_beta_sd: float = 0.5
    alpha_log_sd: float = 0.3
    sigma_delta_sd: float = 0.3  # paper variant: HalfNormal scale of sigma_delta[f]
    position_sd: float = 1.0  # positional variant: scale of the zero-sum position effects
    mu_log_sigma_mean: float = -1.2
    mu_log_sigma_sd: float = 0.5
    tau_log_sigma_sd: float = 0.1


def coords(data: OdiData, variant: str) -> dict[str, list]:
    """Named dimensions for the InferenceData."""
    out = {"model": list(data.models), "item": list(data.items), "cell": list(data.cells),
           "facet": list(data.facets), "ordering": list(range(data.n_orderings)),
           "pair": list(range(len(data.pair_item)))}
    if variant == "positional":
        out["position"] = list(POSITIONS)
    return out


def check_variant(data: OdiData, variant: str) -> None:
    """Raise when the variant is unknown or the data cannot support it."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown ODI variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if variant == "positional":
        if data.pair_weights is None:
            raise ValueError("the positional variant needs position weights: build the data with positional=True")
        located = np.bincount(data.item_facet, weights=data.item_located(), minlength=len(data.facets))
        missing = [f for f, n in zip(data.facets, located, strict=True) if n == 0]
        if missing:
            raise ValueError(
                f"positional variant: no item of facet(s) {missing} has a located gold / supporting "
                "component. option_order needs gold_index (items.jsonl) or a gold letter in "
                "gold_normalized; other facets need items.jsonl with components marked "
                "metadata.supporting=true (pass the run folder, or odi.items=<items.jsonl>), or "
                "leave those facets out (odi.facets=[...]) or use odi.variant=paper")


def build_model(data: OdiData, variant: str = "paper", priors: Priors | None = None) -> pm.Model:
    """The PyMC model for one outcome and one variant."""
    check_variant(data, variant)
    p = priors or Priors()
    pair_item = data.pair_item
    with pm.Model(coords=coords(data, variant)) as model:
        theta = pm.ZeroSumNormal("theta", sigma=p.theta_sd, dims="model")
        mu_beta = pm.Normal("mu_beta", 0.0, p.mu_beta_sd, dims="cell")
        sigma_beta = pm.HalfNormal("sigma_beta", p.sigma_beta_sd, dims="cell")
        z_beta = pm.Normal("z_beta", 0.0, 1.0, dims="item")
        beta = pm.Deterministic("beta", mu_beta[data.item_cell] + sigma_beta[data.item_cell] * z_beta, dims="item")
        alpha = pm.LogNormal("alpha", 0.0, p.alpha_log_sd, dims="item")
        mu_ls = pm.Normal("mu_log_sigma", p.mu_log_sigma_mean, p.mu_log_sigma_sd, dims="facet")
        tau_ls = pm.HalfNormal("tau_log_sigma", p.tau_log_sigma_sd, dims="facet")
        z_ls = pm.Normal("z_log_sigma", 0.0, 1.0, dims="item")
        sigma_pi = pm.Deterministic("sigma_pi", pt.exp(mu_ls[data.item_facet] + tau_ls[data.item_facet] * z_ls),
                                    dims="item")
        z_gamma = pm.Normal("z_gamma", 0.0, 1.0, dims="pair")
        bias = _paper_bias(data, p) if variant == "paper" else _positional_bias(data, p)
        offset = beta[pair_item] + bias + sigma_pi[pair_item] * z_gamma
        eta = alpha[pair_item][data.obs_pair] * (theta[data.obs_model] - offset[data.obs_pair])
        if (data.trials == 1).all():
            pm.Bernoulli("y", logit_p=eta, observed=data.successes.astype(np.int8))
        else:
            pm.Binomial("y", n=data.trials, logit_p=eta, observed=data.successes)
    return model


def _paper_bias(data: OdiData, p: Priors):
    """delta[f,d,k] per cell and ordering index, gathered to the (item, ordering) pairs."""
    sigma_delta = pm.HalfNormal("sigma_delta", p.sigma_delta_sd, dims="facet")
    z_delta = pm.Normal("z_delta", 0.0, 1.0, dims=("cell", "ordering"))
    delta = pm.Deterministic("delta", sigma_delta[data.cell_facet][:, None] * z_delta, dims=("cell", "ordering"))
    return delta[data.item_cell[data.pair_item], data.pair_ordering]


def _positional_bias(data: OdiData, p: Priors):
    """Zero-sum position effects per facet, weighted by where each pair shows the gold / supporting part."""
    delta = pm.ZeroSumNormal("delta_position", sigma=p.position_sd, dims=("facet", "position"))
    weights = data.pair_weights.astype(np.float64)
    return (weights * delta[data.item_facet[data.pair_item]]).sum(axis=1)
