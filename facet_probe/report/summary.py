"""summary.csv's cell metrics: per model x facet x dataset the metrics of the screened trials, the unscreened
numbers beside the cells the image-set screen touched, and the same-order control where orderings were repeated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from facet_probe.datasets.screen_rates import variant_column
from facet_probe.metrics.flips import CELL_KEYS, FewParsed, Metrics, compute_metrics
from facet_probe.report.screening import screen_trials
from facet_probe.store.reading import ItemKey

#: Friendlier names in summary.csv for the metrics module's item-level names.
SUMMARY_RENAMES = {"any_flip": "flip_rate", "any_flip_lo": "flip_rate_lo", "any_flip_hi": "flip_rate_hi"}
#: The unscreened numbers shown beside a screened cell.
UNSCREENED = ["n_items", "flip_rate", "flip_rate_lo", "flip_rate_hi", "accuracy"]


def summarise(trials: pd.DataFrame, items: Mapping[ItemKey, dict], n_boot: int, seed: int,
              few_parsed: FewParsed = FewParsed.EXCLUDE) -> tuple[Metrics, pd.DataFrame]:
    """Metrics on the screened trials, with unscreened columns for the cells the screen touched."""
    screened, dropped = screen_trials(trials, items)
    metrics = compute_metrics(screened, n_boot=n_boot, seed=seed, few_parsed=few_parsed)
    summary = metrics.cells.rename(columns=SUMMARY_RENAMES)
    summary["screened_out"] = 0
    if len(screened) < len(trials):
        raw = compute_metrics(trials, n_boot=n_boot, seed=seed, few_parsed=few_parsed).cells.rename(
            columns=SUMMARY_RENAMES)
        touched = trials[dropped][CELL_KEYS].drop_duplicates()
        raw = raw.merge(touched, on=CELL_KEYS)
        raw = raw[CELL_KEYS + UNSCREENED].rename(columns={c: variant_column(c, "unscreened") for c in UNSCREENED})
        summary = summary.merge(raw, on=CELL_KEYS, how="outer")  # keeps cells the screen emptied
        summary["n_items"] = summary["n_items"].fillna(0).astype(int)
        summary["screened_out"] = (summary["n_items_unscreened"] - summary["n_items"]).fillna(0).astype(int)
    return metrics, summary


@dataclass(frozen=True)
class SameOrderControl:
    """Repeats of one ordering against different orderings (`metrics.same_order`): per item (item_control.csv)
    and per cell (beside summary.csv's columns and in report.md)."""

    items: pd.DataFrame
    cells: pd.DataFrame


def same_order_control_of(trials: pd.DataFrame, n_boot: int, seed: int) -> SameOrderControl | None:
    """The same-order control of trials that repeat an ordering; None when none does."""
    if "repeat_idx" not in trials or not trials["repeat_idx"].max() > 0:
        return None
    # imported here: it imports scipy.stats (0.5 s), which only runs with repeats need
    from facet_probe.metrics.same_order import same_order_control

    return SameOrderControl(*same_order_control(trials, n_boot=n_boot, seed=seed))


def with_control(summary: pd.DataFrame, control: SameOrderControl | None) -> pd.DataFrame:
    """summary.csv's cells with the control's columns (its own item count left out)."""
    if control is None:
        return summary
    keep = [c for c in control.cells.columns if c != "n_items"]
    return summary.merge(control.cells[keep], on=CELL_KEYS, how="left")
