"""CSV tables as pandas writes them (`to_csv(index=False)`, the same bytes), atomically and faster.

pandas formats a float column value by value (`ndarray.astype(str)`) and writes rows through Python's csv module:
together 0.95-1.47 s of a 400k-trial report's 66k-row item_metrics.csv. Here each distinct float is formatted
once, with the same call (a table's floats hold few distinct values: rates over six orderings), and a table whose
texts need no quoting (no comma, quote or line break: the usual case) is written by Arrow's CSV writer, 10x faster;
any other table by pandas. Hand-written because neither library gives pandas' text fast: Arrow writes 1.0 as 1,
true for True, and quotes every text unless told never to (then it refuses a text that needs quotes, and pandas
writes that table).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from facet_probe.store.atomic import atomic_path
from facet_probe.store.table_rules import check_table

#: pandas' text for a missing value (`to_csv`'s default na_rep).
MISSING = ""
#: Arrow types whose CSV text is pandas' (texts, integers, missing), once floats and booleans are texts.
_SAME_TEXT = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_null)


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write `frame` as `frame.to_csv(path, index=False)` would, atomically; returns `path`. A table that breaks
    the project's rule (`store.table_rules`: intervals hold their points, counts are whole, rates in [0, 1]) is
    not written: `TableRuleBroken` names the table, column and row."""
    check_table(frame, str(path))
    text = formatted_floats(frame)
    with atomic_path(path) as tmp:
        if not arrow_wrote(text, tmp):
            text.to_csv(tmp, index=False)  # (over what Arrow began, if it began)
    return path


def write_rows(path: Path, rows: Sequence[Mapping], columns: Sequence[str] | None = None) -> Path:
    """Rows of dicts as `csv.DictWriter` writes them (`columns`: default every key, first seen first; other keys
    left out), atomically, once they keep the table rules (`check_table`) as `write_csv`'s tables do."""
    columns = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
    check_table(pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns), str(path))
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def arrow_wrote(frame: pd.DataFrame, path: Path) -> bool:
    """Write the frame's CSV as pandas writes it, by Arrow, where that gives the same bytes: every column text, an
    integer or a boolean (floats already text: `formatted_floats`), at least two columns (pandas quotes the empty
    text of a one-column row), no text that needs quotes, lines ending in '\n'. False (the file, if begun, to be
    written again) otherwise."""
    if os.linesep != "\n" or len(frame.columns) < 2 or not frame.columns.is_unique:
        return False
    if not all(isinstance(name, str) for name in frame.columns):
        return False
    columns = {}
    for name, dtype in frame.dtypes.items():
        column = frame[name]
        if dtype == np.bool_:
            column = np.where(column.to_numpy(), "True", "False")  # pandas' text of a bool
        try:
            columns[name] = pa.array(column, from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError):
            return False
        if not any(same(columns[name].type) for same in _SAME_TEXT):
            return False
    with open(path, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerow(frame.columns)  # the header, as pandas writes it
    try:
        with open(path, "ab") as fh:
            pa_csv.write_csv(pa.table(columns), fh, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    except pa.ArrowInvalid:  # a text with a comma, quote or line break: pandas quotes it
        return False
    return True


def formatted_floats(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each float64 column as the text pandas' CSV writer gives its values (missing: ""), formatted
    once per distinct value; the other columns are shared, not copied."""
    floats = [name for name, dtype in frame.dtypes.items() if dtype == np.float64]
    if not floats or not frame.columns.is_unique:  # (a frame with a repeated name is written as it is)
        return frame
    columns = {name: (float_texts(frame[name].to_numpy()) if name in floats else frame[name])
               for name in frame.columns}
    return pd.DataFrame(columns, index=frame.index, columns=frame.columns)


def float_texts(values: np.ndarray) -> np.ndarray:
    """Each float's CSV text (`astype(str)`, as pandas; NaN -> ""), as objects. Distinct values by their bits, so
    -0.0 keeps its sign and each NaN is missing."""
    bits, codes = np.unique(np.ascontiguousarray(values).view(np.int64), return_inverse=True)
    distinct = bits.view(np.float64)
    texts = distinct.astype(str).astype(object)
    texts[np.isnan(distinct)] = MISSING
    return texts[codes.reshape(-1)]
