"""The ODI item-response models in PyMC: `positional` (identified, the default) and `paper` (the reference's).

Both: y[m,i,k] ~ Binomial(n, logistic(alpha_i * (theta_m - beta_i - bias[i,k] - gamma[i,k]))) with
ability theta (sum to zero), difficulty beta_i = mu_beta[d] + sigma_beta[d] * z_i per facet-dataset
cell d, discrimination alpha, and per-item order noise gamma[i,k] = sigma_pi[i] * z[i,k] with
log sigma_pi[i] = mu_log_sigma[f] + tau_log_sigma[f] * z_i.
- paper: bias = delta[d,k] = sigma_delta[f] * z[d,k], indexed by ordering *index* k. Only k = 0 (the
  identity) means the same ordering across items, and the mean of delta over k trades off against
  mu_beta[d]: delta is identified by its priors alone.
- positional: bias = sum_p w[i,k,p] * delta_position[f,p], p in (first, middle, last) the display
  position of the gold / supporting component, with delta_position summing to zero over p within a
  facet (so it cannot absorb difficulty) and a fixed-scale prior (no shrinkage towards "no bias").

Sampling parametrisation (same joint distribution, so the same posterior): the likelihood only sees
each item's location L_i = beta_i + mean_k(delta[d,k] + gamma[i,k]) and the zero-mean deviations over
k. We sample L_i directly (centred: every item has many trials), the deviations as centred-to-zero
standard normals, and the cell location c_d = mu_beta[d] + mean_k delta[d,k]. The splits the data
cannot see (beta_i vs mean gamma, mu_beta vs mean delta) are drawn from their exact conditional priors
using the projected-out means of the free normals as auxiliary N(0, 1) draws. This removes the ridges
that made the reference sampler slow (R-hat 1.1, ESS ~20 for mu_beta, z_beta and sigma_delta).
By default (`scales=conditional`) the order noise and each item's log sigma_pi are also drawn conditionally
centred on what the counts say about them (centring.py) and the HalfNormal scales sign-symmetric, so no scale
forms a ridge with the thousands of effects it governs (docs/odi.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from facet_probe.config.loading import parse_enum
from facet_probe.core.extras import missing
from facet_probe.odi.centring import (
    PairEvidence,
    conditionally_centred_normal,
    in_offset_units,
    log_sigma_evidence,
    pair_evidence,
)
from facet_probe.odi.data import OdiData
from facet_probe.odi.kernel import LoglikKernel, block_pairs, blocked_counts, blocked_loglik, resolve_kernel
from facet_probe.odi.positions import POSITIONS

try:  # the [odi] extra: without it, one line naming the pip command (facet_probe.core.extras)
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
except ModuleNotFoundError as exc:
    raise missing(exc, "odi", "facet_probe.odi") from exc


class Variant(StrEnum):
    """Which systematic-bias term the model carries (`odi.variant`); docs/odi.md."""

    positional = "positional"  # the default: identified; |delta| is a position bias
    paper = "paper"  # the reference's (FACET-PROBE v0.0.1), kept to reproduce the paper's Table 2


class ScaleParam(StrEnum):
    """How the order noise and the hierarchical scales that limit ESS enter (`odi.scales`): tau_log_sigma in
    both variants, sigma_delta in the paper one. All give the same posterior; docs/odi.md has the speeds."""

    conditional = "conditional"  # the default: order noise and log sigma_pi conditionally centred on the counts'
    #                              estimates (centring.py), scales sign-symmetric (tau = |s|, s ~ N(0, prior sd))
    noncentred = "noncentred"  # the reference's coordinates: log sigma_pi = mu + tau * z, gamma = sigma_pi * z
    centred = "centred"  # log sigma_pi ~ N(mu, tau), delta ~ N(0, sigma_delta): for data-rich items


def parse_scales(value) -> ScaleParam:
    """`odi.scales` as a ScaleParam; an unknown name is a ConfigError naming the choices."""
    return parse_enum(ScaleParam, value, "odi.scales")

#: What each variant's |delta| can and cannot show, written beside every fit (fit_summary.json, odi_status.json).
DELTA_READS = {
    Variant.positional: {
        "shows": "the mean absolute effect of showing the gold / supporting component first, middle or last "
                 "(a zero-sum contrast per facet, learned from within-item differences between orderings), "
                 "with its sign in signed_delta.csv: a position bias",
        "cannot_show": "order effects unrelated to where the gold / supporting component is shown (they are "
                       "order noise, sigma_pi); facets or items without a located component do not inform it "
                       "(n_located)",
    },
    Variant.paper: {
        "shows": "the spread of per-ordering-index effects delta[cell, k] as the paper's Table 2 reports it "
                 "(for reproduction)",
        "cannot_show": "a systematic bias: k != 0 is a different permutation for each item and the mean of "
                       "delta over k trades off with mu_beta, so delta is identified by its prior alone; a "
                       "position bias is reported as order noise (sigma_pi) and delta shrinks towards 0. Use "
                       "odi.variant=positional to measure bias",
    },
}


def parse_variant(value) -> Variant:
    """`odi.variant` as a Variant; an unknown name is a ConfigError naming the setting, the choices and the
    nearest."""
    return parse_enum(Variant, value, "odi.variant")


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
    out: dict[str, list] = {"model": list(data.models), "item": list(data.items), "cell": list(data.cells),
           "facet": list(data.facets), "ordering": list(range(data.n_orderings)),
           "pair": list(range(len(data.pair_item))), "contrast": list(range(max(data.n_orderings - 1, 0)))}
    if variant == "positional":
        out["position"] = list(POSITIONS)
    return out


def check_variant(data: OdiData, variant: str) -> None:
    """Raise when the variant is unknown or the data cannot support it."""
    variant = parse_variant(variant)
    if variant is Variant.positional:
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
                "leave those facets out (odi.facets=[...]) or use odi.variant=paper (the reference's model, "
                "whose |delta| does not measure a bias)")


class PairSpread:
    """Item-level terms to (item, ordering) pairs: a repeat when every item has every ordering (pairs are
    item-major, data.py sorts them), else a gather. A repeat's gradient is a reshape-sum where a gather's is
    a scatter-add (with the blocked Op 2-3% faster per gradient at 54k and 389k trials, docs/odi.md)."""

    def __init__(self, data: OdiData, gather: bool = False):
        self.k = data.n_orderings
        self.index = data.pair_item
        self.regular = not gather and data.every_item_has_every_ordering

    def __call__(self, x):
        return pt.repeat(x, self.k, axis=0) if self.regular else x[self.index]

    def item_mean(self, x_pair, item_pairs: np.ndarray):
        """Mean over each item's pairs."""
        if self.regular:
            return x_pair.reshape((-1, self.k)).mean(axis=1)
        return pt.zeros(len(item_pairs))[self.index].inc(x_pair) / item_pairs


def split_normal_sum(total, var_a, var_b, aux):
    """Draw A from A | A + B = total, for independent A ~ N(0, var_a), B ~ N(0, var_b), via aux ~ N(0, 1)."""
    share = var_a / (var_a + var_b)
    return total * share + pt.sqrt(var_b * share) * aux


def build_model(data: OdiData, variant: str = "paper", priors: Priors | None = None,
                float32: bool = True, kernel: LoglikKernel = LoglikKernel.auto,
                gather: bool = False, scales: ScaleParam = ScaleParam.conditional) -> pm.Model:
    """The PyMC model for one outcome and one variant (`gather`: index pairs even where a reshape would do;
    `scales`: how order noise and hierarchical scales are drawn, conditional | noncentred | centred, one posterior)."""
    check_variant(data, variant)
    scales = parse_scales(scales)
    kernel = resolve_kernel(kernel, len(data.models) * len(data.pair_item))
    # repeats pay with the blocked Op (measured 2-3% per gradient) and cost with the graph (30-45%): graph gathers
    to_pairs = PairSpread(data, gather or kernel is LoglikKernel.graph)
    p = priors or Priors()
    n_items = len(data.items)
    item_pairs = np.bincount(data.pair_item, minlength=n_items).astype(np.float64)  # K_i
    cell, facet = data.item_cell, data.item_facet
    with pm.Model(coords=coords(data, variant)) as model:
        theta = pm.ZeroSumNormal("theta", sigma=p.theta_sd, dims="model")
        sigma_beta = pm.HalfNormal("sigma_beta", p.sigma_beta_sd, dims="cell")
        alpha = pm.LogNormal("alpha", 0.0, p.alpha_log_sd, dims="item")
        mu_ls = pm.Normal("mu_log_sigma", p.mu_log_sigma_mean, p.mu_log_sigma_sd, dims="facet")
        if variant == "paper":
            c_loc, mu_beta, bias = _paper_terms(data, p, to_pairs, scales)
        else:
            mu_beta = c_loc = pm.Normal("mu_beta", 0.0, p.mu_beta_sd, dims="cell")
            bias = _positional_bias(data, p, to_pairs)
        pilot = pair_evidence(data) if uses_conditional_centring(data, scales) else None  # None: not centred
        if pilot is not None:
            pilot = dataclasses.replace(pilot, contrasts=outcome_data("evidence_contrasts", pilot.contrasts),
                                        precision=outcome_data("evidence_precision", pilot.precision))
        evidence = None if pilot is None else in_offset_units(pilot, alpha)
        # the order noise's share of each item's deviations over orderings, as the counts estimate it
        residual = None if evidence is None else evidence.contrasts - bias.reshape((n_items, -1)) @ evidence.basis.T
        log_sigma_pi = _log_sigma_pi(mu_ls, facet, p.tau_log_sigma_sd, scales, evidence, residual)
        sigma_pi = pm.Deterministic("sigma_pi", pt.exp(log_sigma_pi), dims="item")
        gamma_dev = _order_noise(sigma_pi, to_pairs, item_pairs, evidence, residual)
        gamma_mean_var = sigma_pi**2 / item_pairs
        loc = pm.Normal("item_location", c_loc[cell], pt.sqrt(sigma_beta[cell] ** 2 + gamma_mean_var), dims="item")
        aux = pm.Normal("split_aux", 0.0, 1.0, dims="item")  # prior-only: picks beta_i within its ridge
        spread = split_normal_sum(loc - c_loc[cell], sigma_beta[cell] ** 2, gamma_mean_var, aux)
        pm.Deterministic("beta", mu_beta[cell] + spread, dims="item")
        offset = to_pairs(loc) + bias + gamma_dev
        pm.Potential("y_loglik", binomial_loglik(data, theta, to_pairs(alpha), offset, float32, kernel))
    return model


def binomial_loglik(data: OdiData, theta, alpha_pair, offset_pair, float32: bool = True,
                    kernel: LoglikKernel = LoglikKernel.blocked):
    """Sum over observations of y * eta - n * softplus(eta), eta = alpha * (theta - offset).

    Dense (models x pairs, with n = 0 where a model lacks a pair) when at least half the grid is
    observed, else gathered per observation. float32 for the element-wise terms only (the costly
    exp / log1p); sums are accumulated in float64, so logp stays accurate to ~1e-7 per trial.
    The dense grid goes through the blocked one-pass Op (kernel.py) unless `kernel` is `graph`.
    """
    dtype = "float32" if float32 else "float64"
    dense = data.dense_counts()
    if dense is not None and kernel is LoglikKernel.blocked:
        blocks = blocked_counts(*dense, block=block_pairs(len(data.models)), dtype=dtype)
        succ, trials = (outcome_data(n, a) for n, a in zip(("successes", "trials"), blocks, strict=True))
        return blocked_loglik(theta, alpha_pair, offset_pair, succ, trials, dtype=dtype)
    if dense is not None:
        succ, trials = (outcome_data(n, a.astype(dtype)) for n, a in zip(("successes", "trials"), dense, strict=True))
        eta = alpha_pair.astype(dtype)[None, :] * (theta.astype(dtype)[:, None] - offset_pair.astype(dtype)[None, :])
        return (succ * eta - trials * pt.softplus(eta)).sum(axis=0).astype("float64").sum()
    a, off = alpha_pair[data.obs_pair].astype(dtype), offset_pair[data.obs_pair].astype(dtype)
    eta = a * (theta[data.obs_model].astype(dtype) - off)
    succ, trials = (outcome_data(n, a.astype(dtype)) for n, a in (("successes", data.successes), ("trials", data.trials)))
    terms = succ * eta - trials * pt.softplus(eta)
    return terms.astype("float64").sum()


def outcome_data(name: str, value: np.ndarray):
    """An array of the outcome's counts (or of what they say) as a named data variable of the model being built,
    its dtype kept: a compiled model takes another outcome's values for it without compiling again (fit.py)."""
    shared = pytensor.shared(np.ascontiguousarray(value), name=name)
    pm.modelcontext(None).register_data_var(shared)
    return shared


def _half_normal_scale(name: str, sd: float, dims: str, scales: ScaleParam):
    """A HalfNormal(sd) scale `name`; returns the factor the model multiplies by. Under `conditional` the factor
    is s ~ N(0, sd) and `name` records |s|: s * z with z ~ N(0, 1) symmetric has the law of |s| * z, and
    the sampler meets a Gaussian instead of the exponential tail of log(scale) towards 0."""
    if scales is not ScaleParam.conditional:
        return pm.HalfNormal(name, sd, dims=dims)
    signed = pm.Normal(f"{name}_signed", 0.0, sd, dims=dims)
    pm.Deterministic(name, abs(signed), dims=dims)
    return signed


def _log_sigma_pi(mu, facet: np.ndarray, tau_sd: float, scales: ScaleParam, evidence: PairEvidence | None = None,
                  residual=None):
    """Per-item log sigma_pi ~ N(mu[f], tau[f]): conditionally centred on the counts' estimate (`conditional`
    with evidence), mu + tau * z (non-centred, also `conditional` without evidence) or directly (centred)."""
    tau = _half_normal_scale("tau_log_sigma", tau_sd, "facet", scales)
    if scales is ScaleParam.centred:
        return pm.Normal("log_sigma_pi", mu[facet], tau[facet], dims="item")
    if evidence is not None:
        estimate, info = log_sigma_evidence(residual, evidence.precision, mu[facet], len(evidence.basis) + 1)
        return mu[facet] + conditionally_centred_normal("log_sigma_conditional", tau[facet], estimate, info, "item")
    return mu[facet] + tau[facet] * pm.Normal("z_log_sigma", 0.0, 1.0, dims="item")


def uses_conditional_centring(data: OdiData, scales: ScaleParam) -> bool:
    """Whether the fit centres the order noise on the counts (`conditional` and every item has every
    ordering; otherwise it falls back to the non-centred form); written to fit_summary.json."""
    return parse_scales(scales) is ScaleParam.conditional and data.every_item_has_every_ordering


def _order_noise(sigma_pi, to_pairs: PairSpread, item_pairs: np.ndarray, evidence: PairEvidence | None, residual):
    """Per-pair order noise gamma[i, k] minus its item mean (the mean goes into the item location).

    With evidence: K - 1 orthonormal contrasts per item, conditionally centred on the residual the counts
    estimate (centring.py). Otherwise free normals per pair, centred per item, with the projected-out mean an
    auxiliary prior-only draw (non-centred)."""
    if evidence is not None:
        precision = evidence.precision[:, None]
        contrasts = conditionally_centred_normal("gamma_conditional", sigma_pi[:, None], residual, precision,
                                                 ("item", "contrast"))
        return (contrasts @ evidence.basis).reshape((-1,))
    z_gamma = pm.Normal("z_gamma", 0.0, 1.0, dims="pair")
    return to_pairs(sigma_pi) * (z_gamma - to_pairs(to_pairs.item_mean(z_gamma, item_pairs)))


def _delta_deviations(sd_cell, scales: ScaleParam):
    """delta[d, k] minus its mean over k, for delta iid N(0, sd_cell[d]) (the mean is left prior-only)."""
    if scales is ScaleParam.centred:
        raw = pm.Normal("delta_raw", 0.0, sd_cell[:, None], dims=("cell", "ordering"))
        return raw - raw.mean(axis=1)[:, None]
    if scales is ScaleParam.conditional:  # the same law, with K - 1 free coordinates per cell
        return sd_cell[:, None] * pm.ZeroSumNormal("z_delta", sigma=1.0, dims=("cell", "ordering"))
    z_delta = pm.Normal("z_delta", 0.0, 1.0, dims=("cell", "ordering"))
    return sd_cell[:, None] * (z_delta - z_delta.mean(axis=1)[:, None])


def _paper_terms(data: OdiData, p: Priors, to_pairs: PairSpread, scales: ScaleParam = ScaleParam.conditional):
    """(cell location c_d, mu_beta, delta deviations gathered to pairs) for the paper variant."""
    k = data.n_orderings
    sigma_delta = _half_normal_scale("sigma_delta", p.sigma_delta_sd, "facet", scales)
    sd_cell = sigma_delta[data.cell_facet]  # signed under `conditional`: it enters as sd * z and sd ** 2
    delta_mean_var = sd_cell**2 / k
    c_loc = pm.Normal("cell_location", 0.0, pt.sqrt(p.mu_beta_sd**2 + delta_mean_var), dims="cell")
    aux = pm.Normal("cell_split_aux", 0.0, 1.0, dims="cell")  # prior-only: picks mu_beta within its ridge
    mu_beta = pm.Deterministic("mu_beta", split_normal_sum(c_loc, p.mu_beta_sd**2, delta_mean_var, aux), dims="cell")
    delta_dev = _delta_deviations(sd_cell, scales)
    pm.Deterministic("delta", (c_loc - mu_beta)[:, None] + delta_dev, dims=("cell", "ordering"))
    if to_pairs.regular:
        return c_loc, mu_beta, delta_dev[data.item_cell].reshape((-1,))
    return c_loc, mu_beta, delta_dev[data.item_cell[data.pair_item], data.pair_ordering]


def _positional_bias(data: OdiData, p: Priors, to_pairs: PairSpread):
    """Zero-sum position effects per facet, weighted by where each pair shows the gold / supporting part."""
    delta = pm.ZeroSumNormal("delta_position", sigma=p.position_sd, dims=("facet", "position"))
    assert data.pair_weights is not None, "the positional variant's data carry the pairs' position weights"
    weights = data.pair_weights.astype(np.float64)
    return (weights * to_pairs(delta[data.item_facet])).sum(axis=1)
