"""Order-sensitivity metrics: trials -> per-item statistics -> cell summaries -> paper tables.

Pure and vectorised (pandas/numpy, no Python loop per item). An *item* is (model, facet, dataset,
item_id); a *cell* is (model, facet, dataset).

Per item, over its K orderings (one answer per ordering: with repeats, the lowest ``repeat_idx``,
i.e. repeat 0; the same-order control in `facet_probe.metrics.same_order` uses every repeat):

- ``any_flip``: more than one distinct answer;
- ``disagreement``: the share of ordering pairs whose answers differ;
- ``osi``: answer entropy / log(number of answers possible), that number being min(K, n_options) for
  multiple-choice items and K for free-form answers;
- ``modal_answer``: the most frequent parsed answer; ties go to the answer given under the earliest
  ordering (ordering 0 is the source order, so a tie favours the unpermuted answer);
- ``accuracy``, ``parse_rate``.

Unparseable answers (`PARSE_ERROR`) are counted both ways: as one more distinct answer (``any_flip``,
``disagreement``, ``osi``; the OSI normaliser then allows n_options + 1 answers when the item has a
parse error) and dropped (the ``*_parsed`` columns, computed over the parsed answers only, NaN with
fewer than two; `FewParsed.NOT_FLIPPED` makes ``any_flip_parsed`` 0 there instead, FACET-PROBE v0.0.1's
rule). ``accuracy`` counts a parse error as wrong; ``accuracy_parsed`` is the reference's macro accuracy,
over the parsed answers only. Metrics of an item with fewer than two answers are NaN (no pair to compare).
"""

from __future__ import annotations

import functools
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd
from threadpoolctl import ThreadpoolController

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.facets import MAIN_FACETS

ITEM_KEYS = ["model", "facet", "dataset", "item_id"]
CELL_KEYS = ["model", "facet", "dataset"]
#: The one seed of every item-bootstrap interval (each cell's generator is seeded by it and the cell's key,
#: `cell_rng`): the audit's `bootstrap_seed`, the report's and the paper's `seed` default to it, so a cell's
#: interval is the same number in report.md, facet_model.csv and the paper's tables.
INTERVAL_SEED = 0
#: Item metrics summarised per cell (mean, with an item-bootstrap CI).
SUMMARY_METRICS = ("any_flip", "disagreement", "osi", "any_flip_parsed", "disagreement_parsed",
                   "osi_parsed", "accuracy", "accuracy_parsed", "parse_rate", "modal_correct")


class FewParsed(StrEnum):
    """What ``any_flip_parsed`` is for an item with fewer than two parsed answers."""

    EXCLUDE = "exclude"  # no pair to compare: NaN, left out of the cell mean (the default)
    NOT_FLIPPED = "not_flipped"  # FACET-PROBE v0.0.1: not flipped, and counted in the cell's items
#: Score kinds whose permutation is over the options, so len(permutation) is the number of options
#: (used when a trial file has no ``n_options``: FACET-PROBE v0.0.1 files).
_OPTION_PERMUTING_KINDS = ("inverse_permutation", "option_content_idx")


# --- preparation ---------------------------------------------------------------------------------


def prepare_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """The columns metrics need, in canonical form, from our trials or FACET-PROBE v0.0.1 files.

    Adds ``answer`` (PARSE_ERROR for null/empty/parse-error answers), ``parsed`` (bool), ``correct``
    (float; parse errors 0, unknown NaN), ``n_options`` (float, NaN for free-form) and ``repeat_idx``.
    """
    missing = [c for c in ("facet", "dataset", "item_id", "ordering_idx", "answer_normalized")
               if c not in trials]
    if missing:
        raise ValueError(f"trials lack the columns {missing}; are these facet_probe / FACET-PROBE trials?")
    model = trials["model"].fillna("") if "model" in trials else pd.Series("", index=trials.index)
    # keys as categoricals (sorted categories): sorting and grouping then work on integer codes
    out = pd.DataFrame({k: pd.Categorical(col.astype(str)) for k, col in
                        (("model", model), *((k, trials[k]) for k in ("facet", "dataset", "item_id")))})
    out.index = trials.index
    out["ordering_idx"] = trials["ordering_idx"].astype(np.int64)
    out["repeat_idx"] = trials["repeat_idx"].fillna(0).astype(np.int64) if "repeat_idx" in trials else 0
    answer = trials["answer_normalized"].astype(object)
    bad = answer.isna() | answer.isin(["", PARSE_ERROR])
    if "parse_status" in trials:
        bad |= trials["parse_status"].eq("parse_error")
    out["answer"] = answer.where(~bad, PARSE_ERROR).astype(str)
    out["parsed"] = ~bad.to_numpy()
    out["correct"] = _as_float(trials.get("correct"), trials.index).where(~bad, 0.0)
    out["n_options"] = _n_options(trials)
    if "gold_normalized" in trials:
        out["gold_normalized"] = trials["gold_normalized"].astype(object)
    for column in ("permutation", "prompt_hash", "call_key"):  # what identifies an ordering and a call: the control
        if column in trials:
            out[column] = trials[column]
    return out.reset_index(drop=True)


_TRUTH = {"true": 1.0, "1": 1.0, "1.0": 1.0, "false": 0.0, "0": 0.0, "0.0": 0.0}


def _as_float(correct: pd.Series | None, index: pd.Index) -> pd.Series:
    """Correctness as 1.0 / 0.0 / NaN (unknown) from bools, numbers, strings or nulls."""
    if correct is None:
        return pd.Series(np.nan, index=index)
    if pd.api.types.is_bool_dtype(correct) or pd.api.types.is_numeric_dtype(correct):
        return correct.astype(float).clip(0.0, 1.0)
    return correct.astype("string").str.strip().str.lower().map(_TRUTH).astype(float)


def _n_options(trials: pd.DataFrame) -> pd.Series:
    n = (pd.to_numeric(trials["n_options"], errors="coerce") if "n_options" in trials
         else pd.Series(np.nan, index=trials.index)).astype(float)
    if n.isna().any() and "score_kind" in trials and "permutation" in trials:
        fill = trials["score_kind"].isin(_OPTION_PERMUTING_KINDS) & n.isna()
        n[fill] = trials.loc[fill, "permutation"].map(len).astype(float)
    return n


def one_answer_per_ordering(prepared: pd.DataFrame) -> pd.DataFrame:
    """One trial per (item, ordering): the lowest repeat_idx (repeat 0), sorted by item and ordering."""
    t = prepared.sort_values(ITEM_KEYS + ["ordering_idx", "repeat_idx"], kind="stable")
    return t.drop_duplicates(ITEM_KEYS + ["ordering_idx"], keep="first").reset_index(drop=True)


def run_codes(sorted_frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """0, 1, 2... per run of equal `keys` in a frame sorted by them (a fast ngroup for sorted data)."""
    n = len(sorted_frame)
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for key in keys:
        col = sorted_frame[key]
        col = col.cat.codes.to_numpy() if isinstance(col.dtype, pd.CategoricalDtype) else col.to_numpy()
        change[1:] |= col[1:] != col[:-1]
    return np.cumsum(change) - 1


def key_frame(t: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The item keys of the given rows, as plain strings."""
    return pd.DataFrame({k: t[k].take(rows).to_numpy().astype(str) for k in ITEM_KEYS})  # converts those rows only


# --- per item --------------------------------------------------------------------------------------


def _answer_counts(item: np.ndarray, answer_code: np.ndarray, parsed: np.ndarray) -> pd.DataFrame:
    """One row per (item, distinct answer): its count and the row of its first (earliest) ordering."""
    frame = pd.DataFrame({"item": item, "code": answer_code, "parsed": parsed,
                          "row": np.arange(len(item))})
    return frame.groupby(["item", "code"], sort=False).agg(
        n=("row", "size"), first_row=("row", "min"), parsed=("parsed", "first")).reset_index()


def _dispersion(item: np.ndarray, n: np.ndarray, total: np.ndarray, n_items: int,
                n_possible: np.ndarray) -> dict[str, np.ndarray]:
    """Distinct answers, any-flip, pairwise disagreement and OSI from per-(item, answer) counts."""
    k = total[item]
    p = n / np.where(k > 0, k, 1)
    entropy = np.bincount(item, weights=-p * np.log(p), minlength=n_items)
    same_pairs = np.bincount(item, weights=n * (n - 1.0), minlength=n_items)
    distinct = np.bincount(item, minlength=n_items).astype(float)
    enough = total >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        disagreement = 1.0 - same_pairs / (total * (total - 1.0))
        osi = entropy / np.log(np.minimum(total, n_possible))
    return {
        "n_answers": distinct,
        "any_flip": np.where(enough, distinct > 1, np.nan),
        "disagreement": np.where(enough, disagreement, np.nan),
        "osi": np.where(enough, np.clip(osi, 0.0, 1.0), np.nan),
    }


def item_metrics(trials: pd.DataFrame, few_parsed: FewParsed = FewParsed.EXCLUDE) -> pd.DataFrame:
    """Per-item order-sensitivity metrics (see the module docstring), one row per item."""
    t = one_answer_per_ordering(prepare_trials(trials))
    item = run_codes(t, ITEM_KEYS)
    n_items = int(item[-1]) + 1 if len(item) else 0
    first = np.flatnonzero(np.diff(item, prepend=-1))
    out = key_frame(t, first)

    parsed = t["parsed"].to_numpy()
    k = np.bincount(item, minlength=n_items).astype(float)
    k_parsed = np.bincount(item, weights=parsed, minlength=n_items)
    n_options = t["n_options"].to_numpy()[first]
    has_error = k_parsed < k
    # answers possible: the options (+1 for a parse error when one occurred), or K for free-form
    possible_all = np.where(np.isnan(n_options), k, n_options + has_error)
    possible_parsed = np.where(np.isnan(n_options), k_parsed, n_options)

    counts = _answer_counts(item, pd.factorize(t["answer"])[0], parsed)
    ci, cn = counts["item"].to_numpy(), counts["n"].to_numpy(dtype=float)
    everything = _dispersion(ci, cn, k, n_items, possible_all)
    pc = counts[counts["parsed"]]
    only_parsed = _dispersion(pc["item"].to_numpy(), pc["n"].to_numpy(dtype=float), k_parsed, n_items,
                              possible_parsed)

    if FewParsed(few_parsed) == FewParsed.NOT_FLIPPED:
        only_parsed["any_flip"] = np.where(k_parsed < 2, 0.0, only_parsed["any_flip"])

    correct = t["correct"].to_numpy()
    known = ~np.isnan(correct)
    known_parsed = known & parsed
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (np.bincount(item, weights=np.where(known, correct, 0.0), minlength=n_items)
                    / np.bincount(item, weights=known, minlength=n_items))
        # the reference's macro accuracy: over the parsed answers only (NaN when none parsed)
        accuracy_parsed = (np.bincount(item, weights=np.where(known_parsed, correct, 0.0), minlength=n_items)
                           / np.bincount(item, weights=known_parsed, minlength=n_items))
    modal = _modal(pc, n_items)
    has_modal = modal["row"] >= 0
    rows = np.where(has_modal, modal["row"], 0)

    out["n_orderings"] = k.astype(int)
    out["n_parsed"] = k_parsed.astype(int)
    out["parse_rate"] = k_parsed / k
    out["n_options"] = n_options
    out = out.assign(**everything, **{f"{name}_parsed": v for name, v in only_parsed.items()})
    out["modal_answer"] = np.where(has_modal, t["answer"].to_numpy()[rows], PARSE_ERROR)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["modal_fraction"] = np.where(has_modal, modal["n"] / k_parsed, np.nan)
    out["modal_correct"] = np.where(has_modal, correct[rows], np.nan)
    out["accuracy"] = accuracy
    out["accuracy_parsed"] = accuracy_parsed
    if "gold_normalized" in t:
        out["gold_normalized"] = t["gold_normalized"].to_numpy()[first]
    return out


def _modal(parsed_counts: pd.DataFrame, n_items: int) -> dict[str, np.ndarray]:
    """Per item, the most frequent parsed answer (ties: the one first given, by ordering): its first
    row and count; row -1 where no answer parsed."""
    order = np.lexsort((parsed_counts["first_row"].to_numpy(), -parsed_counts["n"].to_numpy(),
                        parsed_counts["item"].to_numpy()))
    ranked = parsed_counts.iloc[order]
    best = ranked.drop_duplicates("item", keep="first")
    row = np.full(n_items, -1)
    n = np.zeros(n_items)
    row[best["item"].to_numpy()] = best["first_row"].to_numpy()
    n[best["item"].to_numpy()] = best["n"].to_numpy()
    return {"row": row, "n": n}


# --- cells -----------------------------------------------------------------------------------------


@functools.cache
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()


def one_blas_thread():
    """Context: BLAS on one thread. These products are small; threaded BLAS on a busy machine only
    contends (measured 3x slower on 2 loaded cores)."""
    return _threadpools().limit(limits=1, user_api="blas")


def bootstrap_means(values: np.ndarray, n_boot: int, rng: np.random.Generator,
                    chunk_cells: int = 4_000_000) -> np.ndarray:
    """(n_boot, m) item-bootstrap means of the (n, m) `values` (NaN entries ignored per column).

    Each replicate resamples the n rows with replacement; it is computed as weighted sums (the count
    of each row in the resample) by one matrix product per chunk of replicates, to bound memory.
    """
    values = np.asarray(values, dtype=float)
    values = values[:, None] if values.ndim == 1 else values
    n, m = values.shape
    if n == 0:
        return np.full((n_boot, m), np.nan)
    known = ~np.isnan(values)
    gappy = np.flatnonzero(~known.all(axis=0))  # columns whose denominators vary by replicate
    stacked = np.hstack([np.where(known, values, 0.0), known[:, gappy]])
    out = np.empty((n_boot, m))
    step = max(1, chunk_cells // n)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n, size=(b, n), dtype=np.int32) + (np.arange(b, dtype=np.int32) * n)[:, None]
        weights = np.bincount(draws.ravel(), minlength=b * n).reshape(b, n).astype(float)
        with one_blas_thread():
            sums = weights @ stacked
        counts = np.full((b, m), float(n))
        counts[:, gappy] = sums[:, m:]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + b] = sums[:, :m] / counts
    return out


def cell_rng(seed: int, cell: Sequence[str]) -> np.random.Generator:
    """A generator seeded by (seed, cell key): a cell's CI does not depend on the other cells."""
    return np.random.default_rng([seed, zlib.crc32("\x1f".join(map(str, cell)).encode())])


def percentile_ci(boot: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column of bootstrap replicates."""
    alpha = (1.0 - level) / 2.0
    if not np.isnan(boot).any():  # the same numbers as nanquantile's, which goes column by column
        lo, hi = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
        return lo, hi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column gives a NaN interval
        lo, hi = np.nanquantile(boot, [alpha, 1.0 - alpha], axis=0)
    return lo, hi


#: scipy.special.ndtri(0.975), bit for bit (tests/metrics/test_flips.py holds it to scipy): the 95% intervals need no scipy
#: import (0.2 s of every report).
Z_975 = 1.959963984540054


def normal_quantile(p: float) -> float:
    """The standard normal's quantile at `p`: scipy.stats's norm.ppf, bit for bit."""
    if p == 0.975:
        return Z_975
    from scipy.special import ndtri  # other levels only

    return float(ndtri(p))


def wilson_interval(successes: np.ndarray, n: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion (vectorised; NaN where n == 0): 0 of 200 gives [0, 0.019],
    where a bootstrap of identical items collapses to [0, 0]."""
    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return wilson_around(k / n, n, level)


def wilson_around(p: np.ndarray, n: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval around the share `p` of `n` items (`n` may be an effective, fractional count); it
    always contains `p` (its ends are exact at p = 0 and p = 1)."""
    p, n = np.asarray(p, dtype=float), np.asarray(n, dtype=float)
    z = normal_quantile(1.0 - (1.0 - level) / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo, hi = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    lo, hi = np.where(p <= 0, 0.0, lo), np.where(p >= 1, 1.0, hi)  # exact ends, no rounding residue
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


def item_interval(values: np.ndarray, boot: np.ndarray, level: float = 0.95,
                  shares: Sequence[bool] | None = None,
                  weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The project's one interval rule: the item-bootstrap percentile interval per column of `values`
    ((n items, m metrics)), and a Wilson interval where the bootstrap degenerates (every replicate equal: all
    items alike) and the metric is a share in [0, 1]. The Wilson interval is around the point the replicates
    resample: the items' mean (successes = the column's sum over its items), or, for a mean of means, the
    `weights`-weighted mean (`nested_weights`) with Kish's effective number of items (sum w)^2 / sum w^2, so
    it contains the printed point. `shares` says per column whether it is a share of events at all (default:
    every column in [0, 1] is); a stated probability is not, so fifty items all stating 0.9 have the interval
    [0.9, 0.9]."""
    values = np.asarray(values, dtype=float)
    values = values[:, None] if values.ndim == 1 else values
    lo, hi = percentile_ci(boot, level)
    known = ~np.isnan(values)
    n = known.sum(axis=0)
    share = np.all(np.where(known, (values >= 0) & (values <= 1), True), axis=0)
    if shares is not None:
        share &= np.asarray(shares, dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        flat = np.nanmax(boot, axis=0) - np.nanmin(boot, axis=0) <= 1e-12 if len(boot) else np.ones(n.shape, bool)
    fix = flat & share & (n > 0)
    if fix.any():
        if weights is None:
            w_lo, w_hi = wilson_interval(np.where(known, values, 0.0).sum(axis=0), n, level)
        else:
            w = np.where(known, np.asarray(weights, dtype=float).reshape(len(values), -1), 0.0)
            total = w.sum(axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                w_lo, w_hi = wilson_around((w * np.where(known, values, 0.0)).sum(axis=0) / total,
                                           total ** 2 / (w * w).sum(axis=0), level)
        lo, hi = np.where(fix, w_lo, lo), np.where(fix, w_hi, hi)
    return lo, hi


def nested_weights(known: np.ndarray, levels: Sequence[np.ndarray]) -> np.ndarray:
    """(n, m) weights of n items in a mean of means, per column of `known` ((n,) or (n, m): which values are
    not NaN): the unweighted mean over the groups of `levels[0]` (codes per item), within each the mean over
    the groups of `levels[1]`, ..., down to the mean of each innermost group's known items; a group with
    nothing known is left out, as nanmean leaves it. Weighted by them, a column's mean is that nested mean."""
    known = np.asarray(known, dtype=bool)
    weights = (known[:, None] if known.ndim == 1 else known).astype(float)
    prefixes = [np.zeros(len(weights), dtype=np.int64)]  # per depth, one code per group of levels[:depth]
    for level in levels:
        code = np.unique(np.asarray(level), return_inverse=True)[1].ravel()
        prefixes.append(np.unique(prefixes[-1] * (code.max(initial=0) + 1) + code, return_inverse=True)[1].ravel())
    for group in reversed(prefixes):  # the innermost groups first, then their parents, up to the whole
        for j in range(weights.shape[1]):  # each group with a known item comes to weigh 1 in its parent
            total = np.bincount(group, weights=weights[:, j])[group]
            with np.errstate(invalid="ignore", divide="ignore"):
                weights[:, j] = np.where(total > 0, weights[:, j] / total, 0.0)
    return weights


def nanmean(values: np.ndarray) -> np.ndarray:
    """Column means ignoring NaN (NaN for an all-NaN column, without a warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=0)


def group_rows(frame: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple, np.ndarray]]:
    """(key tuple, row positions) of each group of `keys`, in key order, the rows in frame order: what
    `frame.groupby(keys, sort=True)` yields, without building a frame per group."""
    grouped = frame.groupby(list(keys), sort=True, observed=True)
    codes, sizes = grouped.ngroup().to_numpy(), grouped.size()
    if sizes.empty:
        return []
    order = np.argsort(codes, kind="stable")
    parts = np.split(order[codes[order] >= 0], np.cumsum(sizes.to_numpy())[:-1])  # -1: a row with a missing key
    return [(key if isinstance(key, tuple) else (key,), at) for key, at in zip(sizes.index, parts, strict=True)]


def cell_summary(items: pd.DataFrame, n_boot: int = 1000, level: float = 0.95, seed: int = INTERVAL_SEED,
                 metrics: Sequence[str] = SUMMARY_METRICS) -> pd.DataFrame:
    """Per (model, facet, dataset): item count and the mean of each metric with an item-bootstrap CI.

    Columns ``<metric>``, ``<metric>_lo``, ``<metric>_hi`` (`item_interval` at `level`: the percentile
    interval of `n_boot` replicates seeded by (seed, cell), Wilson where the bootstrap degenerates).
    """
    rows = []
    all_values, orderings = items[list(metrics)].to_numpy(dtype=float), items["n_orderings"].to_numpy()
    for key, at in group_rows(items, CELL_KEYS):
        values = np.asfortranarray(all_values[at])  # column-major, as a frame's values: sums in the same order
        boot = bootstrap_means(values, n_boot, cell_rng(seed, key))
        lo, hi = item_interval(values, boot, level)
        means = nanmean(values)
        row = dict(zip(CELL_KEYS, key, strict=True))
        row.update(n_items=len(at), n_trials=int(orderings[at].sum()))
        for j, name in enumerate(metrics):
            row.update({name: means[j], f"{name}_lo": lo[j], f"{name}_hi": hi[j]})
        rows.append(row)
    columns = [*CELL_KEYS, "n_items", "n_trials", *(f"{m}{s}" for m in metrics for s in ("", "_lo", "_hi"))]
    return pd.DataFrame(rows, columns=columns)


#: An item's accuracy across its orderings: under its worst ordering (right under every one: the paper's P5 oracle),
#: the share of its orderings answered right (`accuracy`: one call's expected accuracy) and under its best (right
#: under at least one: P6).
ORDERING_ACCURACY = ("worst_ordering_accuracy", "accuracy", "best_ordering_accuracy")


def ordering_accuracy(trials: pd.DataFrame, n_boot: int = 1000, level: float = 0.95,
                      seed: int = INTERVAL_SEED) -> pd.DataFrame:
    """Per cell, how far its accuracy moves with the ordering: the means of `ORDERING_ACCURACY` with item-bootstrap
    CIs (`cell_summary`). One answer per ordering (repeat 0) as in `item_metrics`, so `accuracy` and its interval
    are the cell summary's."""
    t = one_answer_per_ordering(prepare_trials(trials))
    items = t.groupby(ITEM_KEYS, observed=True, sort=True)["correct"].agg(
        worst_ordering_accuracy="min", accuracy="mean", best_ordering_accuracy="max", n_orderings="size")
    return cell_summary(items.reset_index(), n_boot, level, seed, ORDERING_ACCURACY)


def group_intervals(items: pd.DataFrame, by: Sequence[str], metrics: Sequence[str] = ("any_flip", "accuracy"),
                    n_boot: int = 1000, level: float = 0.95, seed: int = INTERVAL_SEED) -> pd.DataFrame:
    """CIs of the paper's mean over datasets (per `by`, e.g. model and facet): each replicate resamples the
    items of every dataset on its own (seeded by cell, as `cell_summary`) and averages the dataset means;
    `item_interval`'s rule, Wilson around the mean over datasets where every replicate is equal."""
    rows = []
    all_values = items[list(metrics)].to_numpy(dtype=float)
    cells = items[CELL_KEYS].to_numpy() if set(CELL_KEYS) <= set(items) else None
    dataset, datasets = pd.factorize(items["dataset"], sort=True)  # -1: no dataset, left out as groupby does
    for key, at in group_rows(items, list(by)):
        boots = []
        in_group = dataset[at]
        for code in np.unique(in_group[in_group >= 0]):
            part = np.flatnonzero(in_group == code)
            cell = tuple(cells[at[part[0]]]) if cells is not None else (*key, datasets[code])
            boots.append(bootstrap_means(np.asfortranarray(all_values[at[part]]), n_boot, cell_rng(seed, cell)))
        values = np.asfortranarray(all_values[at])
        weights = nested_weights(~np.isnan(values) & (in_group >= 0)[:, None], [in_group])
        lo, hi = item_interval(values, nanmean(np.stack(boots)), level, weights=weights)
        row = dict(zip(by, key, strict=True))
        for j, name in enumerate(metrics):
            row.update({f"{name}_lo": lo[j], f"{name}_hi": hi[j]})
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *(f"{m}{s}" for m in metrics for s in ("_lo", "_hi"))])


# --- paper aggregation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperTables:
    """The paper's aggregation of cell means (unweighted at every level).

    - ``facet_model``: per (model, facet), the mean over its datasets (``n_datasets``);
    - ``model_main``: per model, the mean over the main facets present (``n_facets``);
    - ``panel``: per facet, the mean over models, plus a row ``facet == "main"`` for the main-facet
      mean (``n_models``).
    """

    facet_model: pd.DataFrame
    model_main: pd.DataFrame
    panel: pd.DataFrame


def paper_tables(cells: pd.DataFrame, main_facets: Sequence[str] = MAIN_FACETS,
                 metrics: Sequence[str] = SUMMARY_METRICS) -> PaperTables:
    """Aggregate cell means: datasets -> (model, facet); main facets -> model; models -> panel."""
    metrics = [m for m in metrics if m in cells]
    grouped = cells.groupby(["model", "facet"], sort=True)
    facet_model = grouped[metrics].mean().join(grouped.size().rename("n_datasets")).reset_index()
    main = facet_model[facet_model["facet"].isin(list(main_facets))]
    by_model = main.groupby("model", sort=True)
    model_main = by_model[metrics].mean().join(by_model.size().rename("n_facets")).reset_index()
    by_facet = facet_model.groupby("facet", sort=True)
    panel = by_facet[metrics].mean().join(by_facet.size().rename("n_models")).reset_index()
    main_row = model_main[metrics].mean().to_frame().T.assign(facet="main", n_models=len(model_main))
    panel = pd.concat([panel, main_row[panel.columns]], ignore_index=True)
    return PaperTables(facet_model, model_main, panel)


@dataclass(frozen=True)
class Metrics:
    items: pd.DataFrame
    cells: pd.DataFrame
    paper: PaperTables


def compute_metrics(trials: pd.DataFrame, n_boot: int = 1000, level: float = 0.95, seed: int = INTERVAL_SEED,
                    main_facets: Sequence[str] = MAIN_FACETS, few_parsed: FewParsed = FewParsed.EXCLUDE) -> Metrics:
    """Item metrics, cell summaries with bootstrap CIs, and the paper tables, in one call."""
    items = item_metrics(trials, few_parsed)
    cells = cell_summary(items, n_boot=n_boot, level=level, seed=seed)
    return Metrics(items, cells, paper_tables(cells, main_facets))
