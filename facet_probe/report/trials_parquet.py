"""trials.parquet: a report's trials as one Parquet file, written a slice of rows at a time, nested records
(usage, provenance) as JSON text and each distinct Python object converted once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from facet_probe.store.atomic import atomic_path
from facet_probe.store.columnar import distinct_objects

#: The trials' columns of nested records, written to trials.parquet as JSON text.
JSON_COLUMNS = ("usage", "provenance")


#: Rows of trials.parquet converted and written at a time (a row group each): its Arrow columns are held for one
#: slice only (a 400k-trial report's provenance text alone was 63 MB whole).
PARQUET_SLICE_ROWS = 65_536


def write_trials_parquet(trials: pd.DataFrame, path: Path) -> Path:
    """Write the trials as one Parquet file, atomically, a slice of rows at a time: `JSON_COLUMNS` as JSON text
    (`json_cells`), the other columns of Python objects (lists, None) as Arrow makes them (`objects_array`). Runs on
    another thread: pandas copies on write, so the caller's later edits of its frame never reach this one."""
    converted = {name: json_cells(trials[name]) if name in JSON_COLUMNS else objects_array(trials[name])
                 for name in trials.columns if trials[name].dtype == object}
    plain = trials.drop(columns=list(converted))
    tables = (arrow_slice(plain, converted, list(trials.columns), start)
              for start in range(0, max(len(trials), 1), PARQUET_SLICE_ROWS))
    first = next(tables)  # an empty frame too is one slice: a file with its columns and no rows
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, first.schema) as writer:
        writer.write_table(first)
        for table in tables:
            writer.write_table(table)
    return path


def arrow_slice(plain: pd.DataFrame, converted: dict[str, DistinctValues], columns: list[str], start: int) -> pa.Table:
    """Rows `start` to `start + PARQUET_SLICE_ROWS` as an Arrow table: the plain columns as Arrow makes them, the
    `converted` columns put in, every column in the trials' order (`columns`)."""
    table = pa.Table.from_pandas(plain.iloc[start:start + PARQUET_SLICE_ROWS], preserve_index=False)
    for position, name in enumerate(columns):
        if name in converted:
            table = table.add_column(position, name, converted[name].slice(start, PARQUET_SLICE_ROWS))
    return table


def objects_array(values: pd.Series) -> DistinctValues:
    """A column of Python objects as `pa.Array.from_pandas` makes it (NaN and None are null), each distinct object
    converted once: a trial's permutation and component ids are shared by the rows read from a columnar copy, so a
    400k-trial column costs a few thousand conversions (0.06 s against 0.13 s, holding the GIL either way)."""
    codes, distinct = distinct_objects(values.tolist())
    return DistinctValues(pa.array(distinct, from_pandas=True), row_codes(codes))


def row_codes(codes: np.ndarray) -> pa.Array:
    """Each row's code as int32 (the codes `distinct_objects` gives are 8 bytes a row: 3.2 MB a column at 400k
    trials, held by the thread writing trials.parquet for each of its ten object columns)."""
    return pa.array(codes.astype(np.int32))


@dataclass(frozen=True)
class DistinctValues:
    """A column as its distinct values and each row's code: its rows are made a slice at a time."""

    values: pa.Array
    codes: pa.Array

    def slice(self, start: int, rows: int) -> pa.Array:
        return self.values.take(self.codes.slice(start, rows))

    def to_array(self) -> pa.Array:
        return self.values.take(self.codes)


def json_cells(values: pd.Series) -> DistinctValues:
    """Each cell as JSON text (keys sorted), each distinct object encoded once: cells read from a trials file's
    columnar copy share one object per distinct value (a run's provenance repeats across its trials)."""
    codes, distinct = distinct_objects(values.tolist())
    texts = pa.array([json.dumps(v, sort_keys=True, default=str) for v in distinct], type=pa.string())
    return DistinctValues(texts, row_codes(codes))
