"""Raw and screened rates side by side for the cells the image-set position screen applies to.

The paper reports image-set flip rates on the screened items (`artifacts/paper/image_set_screened_rates.csv`
of the reference: `k6_flip_rate, n_screened, n_raw_in_file`); this table keeps the unscreened numbers beside
them so a reader sees what the screen changed.
"""

from __future__ import annotations

import pandas as pd

KEYS = ["model", "facet", "dataset"]
SCREENED_FACET = "image_set_order"
METRICS = ("flip_rate", "flip_rate_lo", "flip_rate_hi", "accuracy")


def variant_column(metric: str, variant: str) -> str:
    """`<metric>_<variant>` (`flip_rate_raw`); an interval bound keeps its suffix last (`flip_rate_raw_lo`), the
    project's interval naming (`store.table_rules`)."""
    base, bound = (metric[:-3], metric[-3:]) if metric.endswith(("_lo", "_hi")) else (metric, "")
    return f"{base}_{variant}{bound}"


COLUMNS = [*KEYS, "n_raw", "n_screened", "screened_out",
           *(variant_column(m, kind) for m in METRICS for kind in ("raw", "screened"))]


def screened_rates(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per image-set cell (or any cell the screen touched): n, flip rate (with its interval) and
    accuracy, unscreened (`_raw`) and screened. `summary` is the report's cell table, whose `<metric>` columns
    are screened and `<metric>_unscreened` columns (present where the screen dropped items; an interval's
    bounds `flip_rate_unscreened_lo`, `_hi`) are raw."""
    if summary.empty:
        return pd.DataFrame(columns=COLUMNS)
    touched = summary.get("screened_out", pd.Series(0, index=summary.index)).fillna(0) > 0
    cells = summary[(summary["facet"] == SCREENED_FACET) | touched]
    out = cells[KEYS].copy()
    out["n_screened"] = cells["n_items"].fillna(0).astype(int)
    out["n_raw"] = _raw(cells, "n_items").fillna(0).astype(int)
    out["screened_out"] = out["n_raw"] - out["n_screened"]
    for metric in METRICS:
        out[variant_column(metric, "raw")] = _raw(cells, metric)
        out[variant_column(metric, "screened")] = cells[metric] if metric in cells else float("nan")
    return out[COLUMNS].reset_index(drop=True)


def _raw(cells: pd.DataFrame, metric: str) -> pd.Series:
    """The unscreened value where the screen dropped items, else the (same) screened one."""
    screened = cells[metric] if metric in cells else pd.Series(float("nan"), index=cells.index)
    raw = cells.get(variant_column(metric, "unscreened"))
    return screened if raw is None else raw.where(raw.notna(), screened)
