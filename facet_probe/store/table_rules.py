"""The rule every table the project writes keeps, read from its column names: an interval holds its point, a
count is whole, a rate lies in [0, 1]. A table that breaks it is our bug, so `write_csv` refuses to write it
(`check_table`), and the rehearsal applies `violations` to every CSV it wrote. docs/report.md ("What every
table keeps") states the rule for users.

- **Interval**: a pair `<p>_lo` / `<p>_hi`, `<p>_q<a>` / `<p>_q<100-a>` (quantiles in percent: `_q2.5` /
  `_q97.5`, `_q25` / `_q75`) or `<p>_hdi_<a>%` / `<p>_hdi_<100-a>%` (arviz's `hdi_2.5%`: `p` empty). Its point
  is the column `<p>`, else `<p>_mean` (a posterior summary's: `theta_mean` beside `theta_q2.5`; arviz's
  `mean`): lo <= point <= hi wherever the point is a number (a NaN point may have any interval). An interval
  without a point column keeps lo <= hi.
- **Count**: a column named `n_<what>` holds whole numbers >= 0.
- **Rate**: a column with a rate word (`RATE_WORDS`) among its words (split at `_`) lies in [0, 1]: `flip_rate`,
  `any_flip`, `all_items_accuracy`, `paper_coverage`, `flip_lo`; unless a word says it is another statistic of
  rates (`OTHER_STATISTIC_WORDS`: a difference, `flip_difference`, `parse_rate_drift`; an agreement coefficient,
  `kappa_flip`), so such a column is named so.
Every comparison allows `TOLERANCE` (float rounding). A missing value (NaN) passes everywhere except as the
bound of a point that is a number. Columns of texts or booleans are not read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: How far a value may pass its bound, absolute (relative for values beyond 1): float rounding, no more.
TOLERANCE = 1e-9
RATE_WORDS = frozenset({"rate", "flip", "accuracy", "coverage", "disagreement", "recall", "precision"})
#: Words that make a column with a rate word another statistic: a difference, or Cohen's kappa (in [-1, 1]).
OTHER_STATISTIC_WORDS = frozenset({"difference", "diff", "delta", "drift", "minus", "vs", "kappa"})
COUNT_PREFIX = "n_"
#: A lower bound's name: `<base>_lo`, `<base>_q<a>`, `<base>_hdi_<a>%` (its upper bound: `_hi`, 100 - a).
_LOWER = re.compile(r"(?P<base>.+)_lo|(?P<qbase>.+)_q(?P<q>\d+(?:\.\d+)?)|(?P<hbase>.*?)_?hdi_(?P<h>\d+(?:\.\d+)?)%")


@dataclass(frozen=True)
class Interval:
    """Two columns bounding a third (`point`: None where the table has no column for it)."""

    lo: str
    hi: str
    point: str | None


@dataclass(frozen=True)
class Violation:
    """One value that breaks the rule: its column, its row (0-based) and what is wrong."""

    column: str
    row: int
    problem: str
    where: str = ""  # the row's first text columns (its keys), to find it by

    def line(self, table: str) -> str:
        where = f" ({self.where})" if self.where else ""
        return f"{table}: column {self.column}, row {self.row}{where}: {self.problem}"


class TableRuleBroken(Exception):
    """A table about to be written breaks the rule (a bug in what computed it, not a user error)."""


def intervals(columns: Sequence[str]) -> list[Interval]:
    """The intervals the column names declare (module docstring), each with its point column if there is one."""
    names = set(columns)
    found = []
    for lo in columns:
        match = _LOWER.fullmatch(lo)
        if not match:
            continue
        if match["base"] is not None:
            base, hi = match["base"], f"{match['base']}_hi"
        else:
            group = "q" if match["q"] is not None else "h"
            base, a = match[f"{group}base"], float(match[group])
            if a >= 50:  # an upper bound
                continue
            hi = lo[:match.start(group)] + f"{100 - a:g}" + lo[match.end(group):]
        if hi in names:
            point = next((c for c in (base, "_".join(filter(None, (base, "mean")))) if c in names), None)
            found.append(Interval(lo, hi, point))
    return found


def is_count(column: str) -> bool:
    return column.startswith(COUNT_PREFIX)


def is_rate(column: str) -> bool:
    words = set(column.lower().split("_"))
    return bool(words & RATE_WORDS) and not words & OTHER_STATISTIC_WORDS


def violations(frame: pd.DataFrame) -> list[Violation]:
    """Every value of `frame` that breaks the rule (none for a sound table): intervals, then counts and rates."""
    columns = [c for c in frame.columns if isinstance(c, str)] if frame.columns.is_unique else []
    declared = intervals(columns)
    ruled = {c for i in declared for c in (i.lo, i.hi, i.point) if c}
    ruled |= {c for c in columns if is_count(c) or is_rate(c)}
    numbers = {c: v for c in columns if c in ruled and (v := _numbers(frame[c])) is not None}
    found = [v for i in declared if i.lo in numbers and i.hi in numbers for v in _outside(i, numbers)]
    for column, values in numbers.items():
        known = ~np.isnan(values)
        if is_count(column):
            whole = (values >= 0) & (np.abs(values - np.round(values)) <= TOLERANCE)
            found += [Violation(column, i, f"{_text(values[i])} is not a whole count >= 0")
                      for i in np.flatnonzero(known & ~whole).tolist()]
        elif is_rate(column):
            inside = (values >= -TOLERANCE) & (values <= 1 + TOLERANCE)
            found += [Violation(column, i, f"{_text(values[i])} is a rate outside [0, 1]")
                      for i in np.flatnonzero(known & ~inside).tolist()]
    keys = [c for c in columns if c not in ruled and not pd.api.types.is_numeric_dtype(frame[c])][:3]
    return [Violation(v.column, int(v.row), v.problem, _where(frame, keys, v.row)) for v in found]


def check_table(frame: pd.DataFrame, table: str) -> None:
    """Raise `TableRuleBroken`: one line naming `table`, the column, the row and the values of the first
    violation (and how many more there are); nothing for a sound table."""
    found = violations(frame)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise TableRuleBroken(f"{found[0].line(table)}{more}; a bug in what computed the table: not written")


def _outside(interval: Interval, numbers: dict[str, np.ndarray]) -> list[Violation]:
    """The rows where `interval` does not hold its point (or, with no point, where lo > hi)."""
    lo, hi = numbers[interval.lo], numbers[interval.hi]
    if interval.point not in numbers:
        crossed = ~np.isnan(lo) & ~np.isnan(hi) & (lo > hi + _slack(lo, hi))
        return [Violation(interval.lo, i, f"{interval.lo} {_text(lo[i])} > {interval.hi} {_text(hi[i])}")
                for i in np.flatnonzero(crossed).tolist()]
    point = numbers[interval.point]
    known = ~np.isnan(point)
    missing = known & (np.isnan(lo) | np.isnan(hi))
    with np.errstate(invalid="ignore"):
        below, above = known & (lo > point + _slack(lo, point)), known & (hi < point - _slack(hi, point))
    found = [Violation(interval.lo, i, f"{interval.point} is {_text(point[i])} but has no interval "
                       f"[{_text(lo[i])}, {_text(hi[i])}]") for i in np.flatnonzero(missing).tolist()]
    found += [Violation(interval.lo if below[i] else interval.hi, i, f"{interval.point} {_text(point[i])} is "
                        f"outside [{interval.lo} {_text(lo[i])}, {interval.hi} {_text(hi[i])}]")
              for i in np.flatnonzero(below | above).tolist()]
    return sorted(found, key=lambda v: v.row)


def _slack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`TOLERANCE`, relative for values beyond 1 (infinite values compare exactly)."""
    with np.errstate(invalid="ignore"):
        size = np.fmax(np.abs(a), np.abs(b))
    return TOLERANCE * np.where(np.isfinite(size), np.fmax(size, 1.0), 1.0)


def _where(frame: pd.DataFrame, keys: Sequence[str], row: int) -> str:
    """`key=value` of the row's first text columns that hold something: what a reader finds the row by."""
    values = ((k, frame[k].iloc[row]) for k in keys)
    return ", ".join(f"{k}={v}" for k, v in values if str(v) not in ("", "nan", "None", "<NA>"))


def _text(value: float) -> str:
    return repr(float(value))


def _numbers(column: pd.Series) -> np.ndarray | None:
    """A column's values as floats (missing: NaN), or None for a column of texts or booleans (not ruled)."""
    if pd.api.types.is_bool_dtype(column) or (column.dtype != object and pd.api.types.is_string_dtype(column)):
        return None
    if not pd.api.types.is_numeric_dtype(column):
        if column.map(lambda v: isinstance(v, (bool, str))).any():
            return None
        column = pd.to_numeric(column, errors="coerce")  # numbers (and None) of an object column
    return column.to_numpy(dtype=float, na_value=np.nan)
