"""Conditional centring: draw a normal random effect in coordinates the data leave nearly free.

A random effect x ~ N(0, scale^2) whose likelihood is about N(estimate, 1 / precision) has the conditional
posterior N(r * estimate, r / precision), r = scale^2 precision / (scale^2 precision + 1). Drawn as
x = r * estimate + scale * sqrt(1 - r) * z, z is about N(0, 1) a posteriori whatever the scale, so the sampler
meets no ridge between a scale and the many effects it governs (non-centring is r = 0, centring r = 1; this is
the Gaussian limit of partial non-centring, Papaspiliopoulos, Roberts & Skold 2007, with the location shift).
z's prior is the push-back of N(0, scale^2): every estimate and precision give the same joint law and so the
same posterior; they only have to be roughly right to help. The counts give them without a fit (`pair_evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import helmert

from facet_probe.core.extras import missing
from facet_probe.odi.data import OdiData

try:  # the [odi] extra: without it, one line naming the pip command (facet_probe.core.extras)
    import pymc as pm
    import pytensor.tensor as pt
except ModuleNotFoundError as exc:
    raise missing(exc, "odi", "facet_probe.odi") from exc


@dataclass(frozen=True)
class PairEvidence:
    """What the counts alone say about each item's order noise: its deviations over orderings as K - 1
    orthonormal contrasts (one Newton step of the likelihood from no deviation), with their precision."""

    basis: np.ndarray  # (K - 1, K) orthonormal contrasts, orthogonal to the mean (Helmert)
    contrasts: np.ndarray  # (I, K - 1) estimated deviations of the offset over orderings, in that basis
    precision: np.ndarray  # (I,) mean over orderings of sum_m n p (1 - p): the likelihood's precision per contrast


def pair_evidence(data: OdiData) -> PairEvidence | None:
    """The counts' estimate of every item's order noise, or None unless every item has every ordering.

    Each model's success rate on the item over its orderings is the pilot p; a pair's estimated offset
    deviation is sum(n p - y) / sum(n p (1 - p)) over models, which is what the likelihood's score and
    curvature at zero deviation give at discrimination 1 (`in_offset_units` rescales them)."""
    if not data.every_item_has_every_ordering:
        return None
    n_items, k = len(data.items), data.n_orderings
    trials, succ = data.trials.astype(np.float64), data.successes.astype(np.float64)
    cell = data.obs_model.astype(np.int64) * n_items + data.pair_item[data.obs_pair]
    cell_trials = np.bincount(cell, trials, len(data.models) * n_items)
    pilot = (np.bincount(cell, succ, len(data.models) * n_items) / np.maximum(cell_trials, 1))[cell]
    n_pairs = len(data.pair_item)
    curvature = np.bincount(data.obs_pair, trials * pilot * (1 - pilot), n_pairs)
    score = np.bincount(data.obs_pair, trials * pilot - succ, n_pairs)
    deviation = np.divide(score, curvature, out=np.zeros(n_pairs), where=curvature > 0).reshape(n_items, k)
    basis = helmert(k)
    return PairEvidence(basis=basis, contrasts=deviation @ basis.T,
                        precision=curvature.reshape(n_items, k).mean(axis=1))


def in_offset_units(evidence: PairEvidence, alpha) -> PairEvidence:
    """The evidence for items of discrimination alpha (a tensor: the result holds tensors): the likelihood of
    alpha * (theta - offset) has alpha times the score and alpha^2 times the curvature in the offset that it has
    at alpha = 1. At paper scale this halves how tightly the other coordinates pin tau_log_sigma (docs/odi.md)."""
    return PairEvidence(basis=evidence.basis, contrasts=evidence.contrasts / alpha[:, None],
                        precision=evidence.precision * alpha**2)


def log_sigma_evidence(residual, precision, log_sigma_prior_mean, k: int):
    """(estimate, precision) of log sigma - mu per item from its residual contrasts' marginal N(0, sigma^2 +
    1 / precision): one Newton step of that likelihood at sigma = exp(mu), the facet's typical noise."""
    s2 = pt.exp(2.0 * log_sigma_prior_mean)
    share = s2 * precision / (s2 * precision + 1.0)  # how much of a contrast's variance is order noise
    score = share * ((residual**2).sum(axis=1) * precision / (s2 * precision + 1.0) - (k - 1))
    info = 2.0 * (k - 1) * share**2
    return score / pt.maximum(info, 1e-12), info


def conditionally_centred_normal(name: str, scale, estimate, precision, dims):
    """x ~ N(0, scale^2) drawn as x = r * estimate + scale * sqrt(1 - r) * z (module docstring), z named `name`.

    `scale` may be signed (a sign-symmetric scale): x has the same law for +scale and -scale."""
    spread = scale**2 * precision + 1.0  # 1 / (1 - r)
    z = pm.Normal(name, -scale * precision * estimate / pt.sqrt(spread), pt.sqrt(spread), dims=dims)
    return (1.0 - 1.0 / spread) * estimate + scale / pt.sqrt(spread) * z
