"""Same-order control: is answer change across orderings more than answer change on a re-ask?

With R repeats per ordering, per item (model, facet, dataset, item_id):

- ``d_same``: the share of pairs of answers *to the same ordering* that differ (decoder noise);
- ``d_cross``: the share of pairs of answers *to different orderings* that differ;
- ``delta = d_cross - d_same``: the order effect beyond re-ask noise.

Every repeat is used (the flip metrics use one answer per ordering). An "ordering" is a distinct
prompt (its hash, else its permutation): when n! < K the grammar repeats orderings. Every distinct call
counts (`distinct_calls`): the trials of one shared call (one `call_key`) count once, and the calls a
repeated ordering got at several ordering indices are its repeats, so no answer is dropped. Parse errors
count as a distinct answer unless ``drop_parse_errors``.

Per cell (model, facet, dataset): the means of d_same, d_cross and delta over items where both are
defined, an item-bootstrap percentile CI for mean delta and for the order-excess share
mean(delta) / mean(d_cross), a one-sided p-value for mean delta > 0 from a sign-flip randomisation
test over items (under "order does not matter" each item's delta is centred on 0; flipping the signs
of the item deltas gives the null distribution of their mean; p = (1 + #{null >= observed}) /
(1 + B)), and Benjamini-Hochberg q-values across the cells.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control

from facet_probe.metrics.flips import (
    CELL_KEYS,
    ITEM_KEYS,
    bootstrap_means,
    cell_rng,
    key_frame,
    nanmean,
    one_blas_thread,
    percentile_ci,
    prepare_trials,
    run_codes,
)


def ordering_codes(t: pd.DataFrame) -> np.ndarray:
    """A code per distinct ordering: the prompt hash (what the model saw) when recorded, else the
    permutation, else the ordering index."""
    if "prompt_hash" in t and t["prompt_hash"].notna().all():
        return pd.factorize(t["prompt_hash"])[0]
    if "permutation" in t and t["permutation"].notna().all():
        return pd.factorize(t["permutation"].map(tuple))[0]
    return t["ordering_idx"].to_numpy()


def distinct_calls(trials: pd.DataFrame) -> pd.DataFrame:
    """Every distinct call an item's ordering got, numbered as its repeats: when n! < K a permutation shown at
    several ordering indices was asked once per index (its own calls) or shared one call per repeat
    (`share_repeated_orderings`). Trials of one call (one `call_key`) count once; the calls of one ordering (its
    prompt hash, else its permutation: `ordering_codes`) are its repeats 0, 1, ... in (ordering_idx, repeat_idx)
    order, as FACET-PROBE grouped its answers by permutation, so no two calls share an (ordering, repeat) that the
    control keeps one trial of. A file without call keys (FACET-PROBE's) holds one call per record."""
    t = trials
    if "call_key" in t and t["call_key"].notna().all():
        t = t.drop_duplicates([*ITEM_KEYS, "call_key"], keep="first")
    keys = [*ITEM_KEYS, "_ordering"]
    t = t.assign(_ordering=ordering_codes(t)).sort_values([*keys, "ordering_idx", "repeat_idx"], kind="stable")
    t = t.assign(repeat_idx=t.groupby(keys, sort=False, dropna=False).cumcount())
    return t.sort_index().drop(columns="_ordering")


def _pairs(n: np.ndarray) -> np.ndarray:
    return n * (n - 1.0) / 2.0


def item_control(trials: pd.DataFrame, drop_parse_errors: bool = False) -> pd.DataFrame:
    """Per item: counts of trials, orderings and pairs, and d_same, d_cross, delta (NaN if undefined)."""
    t = distinct_calls(prepare_trials(trials))
    if drop_parse_errors:
        t = t[t["parsed"]]
    t = t.assign(ordering=ordering_codes(t))
    t = t.sort_values(ITEM_KEYS + ["ordering", "repeat_idx", "ordering_idx"], kind="stable").reset_index(drop=True)
    item = run_codes(t, ITEM_KEYS)
    n_items = int(item[-1]) + 1 if len(item) else 0
    first = np.flatnonzero(np.diff(item, prepend=-1))
    codes = pd.DataFrame({"item": item, "ordering": t["ordering"].to_numpy(),
                          "answer": pd.factorize(t["answer"])[0]})

    def pair_sum(keys: list[str]) -> np.ndarray:
        """Per item, the number of pairs of trials that share `keys`."""
        sizes = codes.groupby(keys, sort=False).size()
        owner = sizes.index.get_level_values("item").to_numpy()
        return np.bincount(owner, weights=_pairs(sizes.to_numpy(dtype=float)), minlength=n_items)

    n = np.bincount(item, minlength=n_items).astype(float)
    same_pairs = pair_sum(["item", "ordering"])
    same_agree = pair_sum(["item", "ordering", "answer"])
    cross_pairs = _pairs(n) - same_pairs
    cross_agree = pair_sum(["item", "answer"]) - same_agree
    with np.errstate(invalid="ignore", divide="ignore"):
        d_same = np.where(same_pairs > 0, 1.0 - same_agree / same_pairs, np.nan)
        d_cross = np.where(cross_pairs > 0, 1.0 - cross_agree / cross_pairs, np.nan)
    out = key_frame(t, first)
    out["n_trials"] = n.astype(int)
    out["n_orderings"] = np.bincount(codes.drop_duplicates(["item", "ordering"])["item"],
                                     minlength=n_items)
    out["same_pairs"] = same_pairs.astype(int)
    out["cross_pairs"] = cross_pairs.astype(int)
    out["d_same"] = d_same
    out["d_cross"] = d_cross
    out["delta"] = d_cross - d_same
    return out


def sign_flip_p(deltas: np.ndarray, n_perm: int, rng: np.random.Generator, chunk_cells: int = 4_000_000) -> float:
    """One-sided p-value for mean(deltas) > 0 by random sign flips of the item deltas."""
    deltas = deltas[~np.isnan(deltas)]
    if len(deltas) == 0:
        return np.nan
    observed = deltas.mean()
    exceed = 0
    step = max(1, chunk_cells // len(deltas))
    for start in range(0, n_perm, step):
        b = min(step, n_perm - start)
        signs = rng.integers(0, 2, size=(b, len(deltas))) * 2.0 - 1.0
        with one_blas_thread():
            means = signs @ deltas / len(deltas)
        exceed += int(np.count_nonzero(means >= observed - 1e-12))
    return (1 + exceed) / (1 + n_perm)


def control_summary(items: pd.DataFrame, n_boot: int = 2000, level: float = 0.95, seed: int = 0,
                    alpha: float = 0.05) -> pd.DataFrame:
    """Per cell: mean d_same, d_cross, delta (+ CI), order-excess share (+ CI), p, BH q, significance."""
    rows = []
    for key, group in items.groupby(CELL_KEYS, sort=True):
        both = group[group["d_same"].notna() & group["d_cross"].notna()]
        values = both[["d_same", "d_cross", "delta"]].to_numpy(dtype=float)
        rng = cell_rng(seed, key)
        boot = bootstrap_means(values, n_boot, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            share_boot = boot[:, 2] / boot[:, 1]
        (delta_lo, share_lo), (delta_hi, share_hi) = percentile_ci(
            np.column_stack([boot[:, 2], share_boot]), level)
        d_same, d_cross, delta = nanmean(values)
        row = dict(zip(CELL_KEYS, key, strict=True))
        row.update(n_items=len(group), n_items_with_repeats=len(both), d_same=d_same, d_cross=d_cross,
                   delta=delta, delta_lo=delta_lo, delta_hi=delta_hi,
                   order_excess_share=delta / d_cross if d_cross else np.nan,
                   order_excess_share_lo=share_lo, order_excess_share_hi=share_hi,
                   p_value=sign_flip_p(values[:, 2], n_boot, rng))
        rows.append(row)
    cells = pd.DataFrame(rows)
    if cells.empty:
        return cells
    cells["q_value"] = np.nan
    tested = cells["p_value"].notna()
    if tested.any():
        cells.loc[tested, "q_value"] = false_discovery_control(cells.loc[tested, "p_value"], method="bh")
    cells["significant"] = cells["q_value"] <= alpha
    return cells


def same_order_control(trials: pd.DataFrame, n_boot: int = 2000, level: float = 0.95, seed: int = 0,
                       alpha: float = 0.05, drop_parse_errors: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-item control, per-cell control) for a trial frame with repeats."""
    items = item_control(trials, drop_parse_errors=drop_parse_errors)
    return items, control_summary(items, n_boot=n_boot, level=level, seed=seed, alpha=alpha)
