"""Decoder-noise decomposition (the paper's section 4.1 Q2 and Appendix D): how much of the answer change across
orderings is re-ask noise, per model x facet x temperature, pooled over datasets and per dataset.

Each ordering of an item is asked R times at each temperature T (one run folder per T). Per item, from every
answer (`facet_probe.metrics.same_order.item_control`): ``d_same`` (pairs of answers to one ordering that differ: the
decoder's noise floor), ``d_cross`` (pairs to different orderings that differ) and ``delta = d_cross - d_same``.
Per (item, ordering) the *modal* answer over the R repeats (the decoder-cleaned answer) gives the accuracy
columns: the best and worst ordering's accuracy, their difference (the accuracy swing) and the mean over
orderings (expected accuracy). Items are summarised with the project's item bootstrap (`facet_probe.metrics.flips`),
Benjamini-Hochberg within each temperature. Every column is defined in docs/decoder_noise.md, with the names
FACET-PROBE's `robustness/decoder_decomp_screened_by_facet.csv` gives them (`REFERENCE_NAMES`).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.flips import (
    ITEM_KEYS,
    bootstrap_means,
    cell_rng,
    key_frame,
    nanmean,
    percentile_ci,
    prepare_trials,
    run_codes,
)
from facet_probe.metrics.same_order import distinct_calls, item_control, ordering_codes, sign_flip_p
from facet_probe.scoring.run_trials import check_one_run


class ParseErrors(StrEnum):
    """What an unparseable answer is in the decomposition (members named as typed: `parse_errors=answer`)."""

    drop = "drop"  # left out of every pair and every modal answer (FACET-PROBE's decomposition; the default)
    answer = "answer"  # one more distinct answer (the same-order control's default)


class PValue(StrEnum):
    """The one-sided test of mean delta > 0 (and mean accuracy swing > 0)."""

    bootstrap = "bootstrap"  # share of item-bootstrap means <= 0 (FACET-PROBE's; can be 0; the default)
    sign_flip = "sign_flip"  # the control's sign-flip randomisation test over items, (1 + #) / (1 + B)


#: Per-item values summarised as means with an item-bootstrap interval.
MEANS = ("d_same", "d_cross", "delta", "any_flip", "any_flip_modal", "expected_accuracy",
         "best_ordering_accuracy", "worst_ordering_accuracy", "accuracy_swing")
#: Our column -> FACET-PROBE's column in decoder_decomp_screened_by_facet.csv (its `*_ci` is our `_lo`, `_hi`).
REFERENCE_NAMES = {
    "temperature": "temperature", "n_items": "n_items", "n_dropped": "n_dropped", "parse_rate": "parse_rate",
    "median_same_pairs": "median_same_pairs", "median_cross_pairs": "median_cross_pairs",
    "d_same": "d_same_decoder", "d_cross": "d_cross_total", "delta": "delta_ordering",
    "delta_p": "delta_p_onesided", "delta_q": "delta_p_bh", "delta_significant": "delta_gt0_bh_sig",
    "any_flip": "anyflip_total", "expected_accuracy": "expected_acc", "best_ordering_accuracy": "best_ord_acc",
    "worst_ordering_accuracy": "worst_ord_acc", "accuracy_swing": "acc_swing",
    "accuracy_swing_p": "acc_swing_p_onesided", "accuracy_swing_q": "swing_p_bh",
    "accuracy_swing_significant": "acc_swing_gt0_bh_sig", "answerable_rate": "answerable_rate",
    "accuracy_swing_answerable": "acc_swing_on_answerable", "parse_rate_drift": "parse_rate_vs_T0",
    "parse_drift_flag": "parse_drift_flag",
}


# --- per trial -------------------------------------------------------------------------------------


def trial_temperatures(trials: pd.DataFrame) -> pd.Series:
    """Each trial's sampling temperature (named `temperature`): a `temperature` column's value where the file
    has one (a FACET-PROBE grid file), else what its response records (HF: provenance.generation, API:
    provenance.settings_sent); NaN where none was set (the reference policies, an API that was not sent one)."""
    temperature = (pd.to_numeric(trials["temperature"], errors="coerce").astype(float) if "temperature" in trials
                   else pd.Series(np.nan, index=trials.index)).rename("temperature")
    unset = temperature.isna()
    if "provenance" in trials and unset.any():
        temperature[unset] = _recorded_temperatures(trials.loc[unset, "provenance"])
    return temperature


def _recorded_temperatures(provenance: pd.Series) -> pd.Series:
    """The temperature each trial's provenance records (NaN where none)."""

    def one(prov) -> float:
        if not isinstance(prov, dict):
            return np.nan
        for section in ("generation", "settings_sent"):
            value = (prov.get(section) or {}).get("temperature")
            if value is not None:
                return float(value)
        return np.nan

    return provenance.map(one).astype(float)


# --- per item --------------------------------------------------------------------------------------


def _modal_per_ordering(t: pd.DataFrame, counted: np.ndarray) -> pd.DataFrame:
    """Per (item, ordering): the most frequent counted answer over the repeats (ties: the one given at the
    lowest repeat) and its correctness; PARSE_ERROR (wrong) where no counted answer."""
    frame = pd.DataFrame({"item": t["item"].to_numpy(), "ordering": t["ordering"].to_numpy(),
                          "answer": t["answer"].to_numpy(), "correct": t["correct"].to_numpy(),
                          "repeat": t["repeat_idx"].to_numpy()})
    pairs = frame.drop_duplicates(["item", "ordering"])[["item", "ordering"]]
    answers = (frame[counted].sort_values(["item", "ordering", "repeat"], kind="stable")
               .groupby(["item", "ordering", "answer"], sort=False)
               .agg(n=("repeat", "size"), first=("repeat", "min"), correct=("correct", "first")).reset_index())
    modal = (answers.sort_values(["item", "ordering", "n", "first"], ascending=[True, True, False, True],
                                 kind="stable").drop_duplicates(["item", "ordering"]))
    out = pairs.merge(modal[["item", "ordering", "answer", "correct"]], on=["item", "ordering"], how="left")
    none = out["answer"].isna()
    out.loc[none, "answer"] = PARSE_ERROR
    out.loc[none, "correct"] = 0.0
    return out


def item_decomposition(trials: pd.DataFrame, parse_errors: ParseErrors = ParseErrors.drop) -> pd.DataFrame:
    """Per item (model, facet, dataset, item_id) of trials at one temperature: trial and parse counts, the
    control's pairs and d_same / d_cross / delta, any-flip over every answer and over the modal answers,
    expected / best / worst ordering accuracy of the modal answers and the swing; `kept` where both d_same
    and d_cross are defined (a pair of answers to one ordering and one to two orderings)."""
    drop = ParseErrors(parse_errors) == ParseErrors.drop
    trials = distinct_calls(trials)
    t = prepare_trials(trials)
    t = t.assign(ordering=ordering_codes(t))
    t = t.sort_values(ITEM_KEYS + ["ordering", "repeat_idx", "ordering_idx"], kind="stable").reset_index(drop=True)
    item = run_codes(t, ITEM_KEYS)
    t["item"] = item
    n_items = int(item[-1]) + 1 if len(item) else 0
    out = key_frame(t, np.flatnonzero(np.diff(item, prepend=-1)))
    parsed = t["parsed"].to_numpy()
    counted = parsed if drop else np.ones(len(t), dtype=bool)
    out["n_trials"] = np.bincount(item, minlength=n_items)
    out["n_parsed"] = np.bincount(item, weights=parsed, minlength=n_items).astype(int)
    out["parse_rate"] = out["n_parsed"] / out["n_trials"]

    n_counted = np.bincount(item, weights=counted, minlength=n_items)
    distinct = np.bincount(t.loc[counted, ["item", "answer"]].drop_duplicates()["item"], minlength=n_items)
    out["any_flip"] = np.where(n_counted >= 2, (distinct > 1).astype(float), np.nan)

    modal = _modal_per_ordering(t, counted)
    per = modal.groupby("item", sort=True)
    n_orderings = per.size().reindex(range(n_items)).to_numpy()
    out["n_orderings"] = n_orderings
    answered = modal[modal["answer"] != PARSE_ERROR] if drop else modal  # dropped: no modal answer to compare
    n_answered = answered.groupby("item").size().reindex(range(n_items), fill_value=0).to_numpy()
    n_modal = answered.groupby("item")["answer"].nunique().reindex(range(n_items), fill_value=0).to_numpy()
    out["any_flip_modal"] = np.where(n_answered >= 2, (n_modal > 1).astype(float), np.nan)
    correct = per["correct"]
    out["expected_accuracy"] = correct.mean().reindex(range(n_items)).to_numpy()
    out["best_ordering_accuracy"] = correct.max().reindex(range(n_items)).to_numpy()
    out["worst_ordering_accuracy"] = correct.min().reindex(range(n_items)).to_numpy()
    out["accuracy_swing"] = out["best_ordering_accuracy"] - out["worst_ordering_accuracy"]

    control = item_control(trials, drop_parse_errors=drop)[
        ITEM_KEYS + ["same_pairs", "cross_pairs", "d_same", "d_cross", "delta"]]
    out = out.merge(control, on=ITEM_KEYS, how="left")
    out["kept"] = out["d_same"].notna() & out["d_cross"].notna()
    return out


def decomposition_items(trials: pd.DataFrame, parse_errors: ParseErrors = ParseErrors.drop) -> pd.DataFrame:
    """`item_decomposition` per temperature (a `temperature` column first; NaN: none set). Refuses trials
    where one temperature answers a (model, item, ordering, repeat) row twice (two runs at one T)."""
    temperature = trial_temperatures(trials)
    parts = []
    for value, group in trials.groupby(temperature.rename("temperature"), dropna=False, sort=True):
        where = f"model(s) {', '.join(sorted(group['model'].astype(str).unique()))} at " + (
            "no temperature" if np.isnan(value) else f"temperature {value:g}")
        check_one_run(group, where)
        parts.append(item_decomposition(group, parse_errors).assign(temperature=value))
    if not parts:
        return pd.DataFrame(columns=["temperature", *ITEM_KEYS])
    items = pd.concat(parts, ignore_index=True)
    return items[["temperature", *(c for c in items.columns if c != "temperature")]]


# --- per cell --------------------------------------------------------------------------------------


def _p_value(method: PValue, values: np.ndarray, boot: np.ndarray, n_boot: int, rng: np.random.Generator) -> float:
    """One-sided p for mean(values) > 0."""
    if np.isnan(values).all():
        return np.nan
    if PValue(method) == PValue.sign_flip:
        return sign_flip_p(values, n_boot, rng)
    known = boot[~np.isnan(boot)]
    return float(np.mean(known <= 0.0)) if len(known) else np.nan


def summarise(items: pd.DataFrame, keys: list[str], n_boot: int = 2000, level: float = 0.95, seed: int = 0,
              p_value: PValue = PValue.bootstrap) -> pd.DataFrame:
    """One row per `keys` group of items: counts, parse rate, median pairs, the mean of each of `MEANS` with an
    item-bootstrap interval (over the kept items), the order-excess share and the swing on answerable items
    (ratios of means, intervals from the same replicates), and one-sided p-values for delta and the swing."""
    rows = []
    for key, group in items.groupby(keys, sort=True, dropna=False):
        kept = group[group["kept"]]
        values = kept[list(MEANS)].to_numpy(dtype=float)
        rng = cell_rng(seed, [str(k) for k in key])
        boot = bootstrap_means(values, n_boot, rng)
        col = {name: j for j, name in enumerate(MEANS)}
        with np.errstate(invalid="ignore", divide="ignore"):
            share = boot[:, col["delta"]] / boot[:, col["d_cross"]]
            on_answerable = boot[:, col["accuracy_swing"]] / boot[:, col["best_ordering_accuracy"]]
        lo, hi = percentile_ci(np.column_stack([boot, share, on_answerable]), level)
        means = nanmean(values) if len(kept) else np.full(len(MEANS), np.nan)
        row = dict(zip(keys, key, strict=True))
        row.update(n_items=len(kept), n_dropped=len(group) - len(kept), n_trials=int(group["n_trials"].sum()),
                   parse_rate=group["n_parsed"].sum() / group["n_trials"].sum(),
                   median_same_pairs=kept["same_pairs"].median(), median_cross_pairs=kept["cross_pairs"].median())
        if "dataset" not in keys:
            row["n_datasets"] = group["dataset"].nunique()
        for name, j in col.items():
            row.update({name: means[j], f"{name}_lo": lo[j], f"{name}_hi": hi[j]})
        with np.errstate(invalid="ignore", divide="ignore"):
            row.update(order_excess_share=means[col["delta"]] / means[col["d_cross"]] if means[col["d_cross"]]
                       else np.nan, order_excess_share_lo=lo[len(MEANS)], order_excess_share_hi=hi[len(MEANS)],
                       answerable_rate=means[col["best_ordering_accuracy"]],
                       accuracy_swing_answerable=(means[col["accuracy_swing"]] / means[col["best_ordering_accuracy"]]
                                                  if means[col["best_ordering_accuracy"]] else np.nan),
                       accuracy_swing_answerable_lo=lo[len(MEANS) + 1],
                       accuracy_swing_answerable_hi=hi[len(MEANS) + 1])
        row["delta_p"] = _p_value(p_value, values[:, col["delta"]], boot[:, col["delta"]], n_boot, rng)
        row["accuracy_swing_p"] = _p_value(p_value, values[:, col["accuracy_swing"]],
                                           boot[:, col["accuracy_swing"]], n_boot, rng)
        rows.append(row)
    return pd.DataFrame(rows)


def bh_within_temperature(cells: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Benjamini-Hochberg q-values of delta_p and accuracy_swing_p, the family being the rows of one
    temperature; `<name>_significant` where q <= alpha and the mean is > 0."""
    cells = cells.copy()
    for name in ("delta", "accuracy_swing"):
        q = pd.Series(np.nan, index=cells.index)
        for _, group in cells.groupby("temperature", dropna=False):
            tested = group[f"{name}_p"].dropna()
            if len(tested):
                q[tested.index] = false_discovery_control(tested.to_numpy(), method="bh")
        cells[f"{name}_q"] = q
        cells[f"{name}_significant"] = (q <= alpha) & (cells[name] > 0)
    return cells


def parse_drift(cells: pd.DataFrame, keys: list[str], threshold: float) -> pd.DataFrame:
    """parse_rate minus the T=0 parse rate of the same model, facet (and dataset); NaN without a T=0 row.
    `parse_drift_flag` where |drift| > threshold (a temperature that breaks the answer format confounds d)."""
    base = cells[cells["temperature"] == 0.0][keys + ["parse_rate"]].rename(columns={"parse_rate": "_t0"})
    cells = cells.merge(base, on=keys, how="left")
    cells["parse_rate_drift"] = cells["parse_rate"] - cells["_t0"]
    cells["parse_drift_flag"] = cells["parse_rate_drift"].abs() > threshold
    return cells.drop(columns="_t0")


def _ordered(cells: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Keys, counts and guards first; each statistic beside its interval, p, q and significance."""
    head = [*keys, "n_datasets", "n_items", "n_dropped", "n_trials", "parse_rate", "parse_rate_drift",
            "parse_drift_flag", "median_same_pairs", "median_cross_pairs"]
    body = []
    for name in (*MEANS[:3], "order_excess_share", *MEANS[3:], "answerable_rate", "accuracy_swing_answerable"):
        body += [name, f"{name}_lo", f"{name}_hi", f"{name}_p", f"{name}_q", f"{name}_significant"]
    columns = [c for c in head + body if c in cells]
    return cells[columns].sort_values(keys, kind="stable").reset_index(drop=True)


def decomposition(items: pd.DataFrame, by_dataset: bool, n_boot: int = 2000, level: float = 0.95,
                  seed: int = 0, p_value: PValue = PValue.bootstrap, alpha: float = 0.05,
                  drift_threshold: float = 0.02) -> pd.DataFrame:
    """The decomposition table: one row per model x facet x temperature (pooling the datasets' items), or per
    model x facet x dataset x temperature; BH within each temperature."""
    keys = ["model", "facet", *(["dataset"] if by_dataset else []), "temperature"]
    if items.empty:
        return pd.DataFrame(columns=keys)
    cells = summarise(items, keys, n_boot=n_boot, level=level, seed=seed, p_value=p_value)
    cells = bh_within_temperature(cells, alpha)
    cells = parse_drift(cells, [k for k in keys if k != "temperature"], drift_threshold)
    return _ordered(cells, keys)
