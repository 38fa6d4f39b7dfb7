"""The cost Pareto front of mitigation policies: the points no other point beats on both cost (lower is
better) and the value (accuracy: higher; flip rate: lower). An oracle (it uses the gold answer) is a reference
bound, never on the front; every policy is placed at its accuracy over all items (an abstention is wrong)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def pareto_front(points: pd.DataFrame, cost: str, value: str, higher_is_better: bool = True) -> pd.Series:
    """True for each point on the front: no other point costs no more and is at least as good, and strictly
    better in one of the two. NaN values are never on it."""
    c = points[cost].to_numpy(dtype=float)
    v = points[value].to_numpy(dtype=float) * (1.0 if higher_is_better else -1.0)
    known = ~(np.isnan(c) | np.isnan(v))
    no_worse = (c[None, :] <= c[:, None]) & (v[None, :] >= v[:, None])  # [i, j]: j is no worse than i
    better = (c[None, :] < c[:, None]) | (v[None, :] > v[:, None])
    dominated = (no_worse & better & known[None, :]).any(axis=1)
    return pd.Series(known & ~dominated, index=points.index, name="on_front")


#: Where a policy is placed on the front: its accuracy over all items, an abstention counted wrong (a policy
#: that abstains would otherwise be placed at its accuracy on the items it chose to answer).
PLACED_AT = "all_items_accuracy"


def policy_front(means: pd.DataFrame, cost: str = "calls_per_item") -> pd.Series:
    """`on_front` per policy (`policies.policy_means` rows): the front of the runnable policies at their all-items
    accuracy; an oracle is never on it and does not push a runnable policy off it."""
    runnable = means[~means["oracle"].astype(bool)]
    return pareto_front(runnable, cost, PLACED_AT).reindex(means.index, fill_value=False)
