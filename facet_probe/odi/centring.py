"""How strongly to centre the order noise: each facet's measured reliability of its ordering effects.

Partial non-centring (Papaspiliopoulos, Roberts & Skold 2007): a random effect gamma ~ N(0, sigma^2) is
sampled as gamma = sigma^(1 - w) * zeta with zeta ~ N(0, sigma^(2w)). Every w in [0, 1] gives the same
posterior; w = 0 is the non-centred form (best when the data say little about gamma), w = 1 the centred one
(best when they say much), and the efficient choice is the share of gamma's variance the data pin down,
sigma^2 / (sigma^2 + s^2) with s^2 the likelihood's variance. For order noise that share is the reliability
of the orderings' success rates within an item, which the counts give without a fit (method of moments).
"""

from __future__ import annotations

import numpy as np

from facet_probe.odi.data import OdiData


def ordering_reliability(data: OdiData) -> np.ndarray:
    """(F,) per facet: the share of the between-ordering variance of items' success rates that binomial
    noise does not explain, in [0, 1] (0 where a facet has no item with two orderings)."""
    n_items, n_pairs = len(data.items), len(data.pair_item)
    trials, succ = data.trials.astype(np.float64), data.successes.astype(np.float64)
    obs_item = data.pair_item[data.obs_pair]
    # each model's success rate on the item over its orderings: the binomial noise of one of its trials
    cell = data.obs_model.astype(np.int64) * n_items + obs_item
    cell_n = np.bincount(cell, trials, len(data.models) * n_items)[cell]
    cell_rate = np.bincount(cell, succ, len(data.models) * n_items)[cell] / cell_n
    unbiased = np.where(cell_n > 1, cell_n / np.maximum(cell_n - 1, 1), 1.0)
    pair_n = np.bincount(data.obs_pair, trials, n_pairs)
    pair_rate = np.bincount(data.obs_pair, succ, n_pairs) / np.maximum(pair_n, 1)
    pair_noise = np.bincount(data.obs_pair, trials * cell_rate * (1 - cell_rate) * unbiased, n_pairs) \
        / np.maximum(pair_n, 1) ** 2
    k = np.bincount(data.pair_item, minlength=n_items).astype(np.float64)
    item_rate = np.bincount(data.pair_item, pair_rate, n_items) / np.maximum(k, 1)
    between = np.bincount(data.pair_item, (pair_rate - item_rate[data.pair_item]) ** 2, n_items) \
        / np.maximum(k - 1, 1)
    noise = np.bincount(data.pair_item, pair_noise, n_items) / np.maximum(k, 1)
    usable = k >= 2
    out = np.zeros(len(data.facets))
    for f in range(len(data.facets)):
        rows = usable & (data.item_facet == f)
        total = between[rows].sum()
        if total > 0:
            out[f] = float(np.clip(1.0 - noise[rows].sum() / total, 0.0, 1.0))
    return out
