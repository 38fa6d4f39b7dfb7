"""A trials file's columnar copy (`trials.jsonl.parquet`): read in place of the JSONL while it matches it.

A reader of a 400k-trial run then pays for the columns it reads, not for parsing every line again.
`trials.jsonl` gets `trials.jsonl.parquet` (a shard `shards/a.jsonl` gets `shards/a.jsonl.parquet`; neither matches
the trial files' globs, so a copy is never read as trials). The copy holds the file's frame exactly as parsing the
file gives it (`reading._file_frame`: dtypes, None against NaN, list and dict values) and a stamp of the bytes it was
built from: their size and hashes of their first and last 64 KiB, and the copy's format version. The JSONL stays
the truth: a copy whose stamp does not match the file (appended to, repaired, edited), or that is torn or unreadable,
is never read, and the next read of the JSONL writes a fresh one. Writes are atomic (`store.atomic`) and best effort:
a read-only folder or a full disk leaves no copy and a debug line, never an error.

Columns whose values are not one plain type (lists, dicts, None, mixes) are stored as JSON text, one value a cell,
and decoded on read (pyarrow would turn lists into numpy arrays); a missing value (NaN: the key was absent) is a
null cell. String columns are Arrow strings; numbers and booleans are stored as they are.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from facet_probe.store.atomic import WriteFailed, atomic_path

log = logging.getLogger(__name__)

#: Bumped when what a copy holds or how it is encoded changes: a copy of another version is rebuilt.
FORMAT_VERSION = 1
#: The copy of `trials.jsonl` is `trials.jsonl.parquet`.
SUFFIX = ".parquet"
#: Files smaller than this are not copied: parsing them is as quick as reading a copy (and small fixtures stay
#: alone in their folders).
MIN_BYTES = 1 << 20
#: Bytes hashed at each end of the JSONL for its stamp.
EDGE_BYTES = 1 << 16
#: The Parquet schema's metadata key holding the stamp and the columns' encodings.
META_KEY = b"facet_probe.trials_copy"

#: How a column is stored: as Arrow stores it (numbers, booleans), as Arrow strings (pandas `str`), every value
#: None, or one JSON text a value.
NATIVE, STRING, NONE, JSON = "native", "str", "none", "json"
_NATIVE_KINDS = frozenset("iufb")  # numpy dtype kinds Parquet keeps exactly: ints, unsigned, floats, bools


def copy_path(jsonl: Path) -> Path:
    """Where the copy of the trials file `jsonl` lives: beside it, `<name>.parquet`."""
    return jsonl.with_name(jsonl.name + SUFFIX)


def stamp_of(data: bytes) -> dict:
    """The stamp of a trials file's bytes: size, hashes of its first and last EDGE_BYTES, the copy format."""
    return {"format": FORMAT_VERSION, "size": len(data), "head": _digest(data[:EDGE_BYTES]),
            "tail": _digest(data[-EDGE_BYTES:])}


def file_stamp(path: Path) -> dict | None:
    """The stamp of the file on disk (reads only its two ends); None when it cannot be read."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(0)
            head = fh.read(EDGE_BYTES)
            fh.seek(max(0, size - EDGE_BYTES))
            tail = fh.read(EDGE_BYTES)
    except OSError:
        return None
    return {"format": FORMAT_VERSION, "size": size, "head": _digest(head), "tail": _digest(tail)}


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Copy:
    """A trials file's frame read from its copy, whether the file ends in a torn line (the reader warns), and
    whether every record has a trial key of its own (found when the copy was written: a reader of this file alone
    need not hash 400k keys again to find repeats, 0.2 s)."""

    frame: pd.DataFrame
    torn_tail: bool
    unique_keys: bool = False


#: How long jemalloc keeps freed pages before it gives them back. A read's transient buffers (a copy's pages, its
#: JSON texts) are then freed at once; with the wheels' own setting they were 60 MB of a 400k-trial read's 430 MB.
JEMALLOC_DECAY_MS = 0


@functools.cache
def use_jemalloc() -> str:
    """Arrow's default memory pool to jemalloc, once per process, unless the user chose one
    (ARROW_DEFAULT_MEMORY_POOL) or this pyarrow lacks it; returns the pool in use. The wheels' default, mimalloc,
    read a 400k-trial copy in 1.7-2.0 s where jemalloc took 1.3 s, and the report's peak memory was 60 MB higher
    (docs/scale-out.md)."""
    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc keeps its default
            pa.set_memory_pool(pa.jemalloc_memory_pool())
            pa.jemalloc_set_decay_ms(JEMALLOC_DECAY_MS)
    return pa.default_memory_pool().backend_name


def read_copy(jsonl: Path, want: Callable[[str], bool] | None = None) -> Copy | None:
    """The frame of `jsonl` from its copy (only the columns `want` keeps, when given) when the copy's stamp matches
    the file now; None when there is no copy or it is stale, of another format, torn or unreadable."""
    path = copy_path(jsonl)
    if not path.is_file():
        return None
    use_jemalloc()
    try:
        with path.open("rb") as fh:  # one open file: a copy replaced meanwhile is not read with this one's stamp
            parquet = pq.ParquetFile(fh)
            meta = copy_meta(parquet.schema_arrow)
            if meta is None or meta.get("stamp") != file_stamp(jsonl):
                log.debug("%s: stale or foreign copy of %s; reading the JSONL", path, jsonl.name)
                return None
            names = parquet.schema_arrow.names
            wanted = names if want is None else [c for c in names if want(c)]
            # JSON columns read as dictionaries: each distinct text is decoded once (`_decode_json`), never expanded
            # to one text a row (a 400k-trial provenance column: 0.3 s)
            parquet = pq.ParquetFile(fh, metadata=parquet.metadata,
                                     read_dictionary=[c for c in wanted if meta["kinds"].get(c) == JSON])
            table = parquet.read(columns=wanted, use_threads=True)
        frame = from_table(table, meta["kinds"], meta["rows"])
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException, msgspec.DecodeError) as exc:
        log.debug("%s: unreadable copy (%s); reading the JSONL", path, exc)
        return None
    return Copy(frame, bool(meta.get("torn_tail")), meta.get("unique_keys") is True)


def copy_meta(schema: pa.Schema) -> dict | None:
    """What a copy's schema records of it (stamp, column kinds, rows, ...); None where it records nothing."""
    meta = json.loads((schema.metadata or {}).get(META_KEY, b"null"))
    return meta if isinstance(meta, dict) else None


def copy_rows(jsonl: Path) -> int | None:
    """The rows the copy of `jsonl` holds, from its footer alone (current or not: a hint of the file's size in
    trials, never read as trials); None without a readable copy."""
    try:
        meta = copy_meta(pq.read_schema(copy_path(jsonl)))
    except (OSError, ValueError, pa.ArrowException):
        return None
    return meta.get("rows") if meta is not None and isinstance(meta.get("rows"), int) else None


def write_copy(jsonl: Path, frame: pd.DataFrame, stamp: dict, torn_tail: bool = False) -> Path | None:
    """Write the copy of `jsonl` (its parsed `frame`, the `stamp` of the bytes parsed) atomically; best effort:
    returns None (with a debug line) where it cannot be written or encoded."""
    path = copy_path(jsonl)
    use_jemalloc()
    try:
        table, kinds = to_table(frame)
        meta = {"stamp": stamp, "kinds": kinds, "rows": len(frame), "torn_tail": torn_tail, "source": jsonl.name,
                "unique_keys": unique_keys(frame)}
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, compression="zstd")
    except (OSError, WriteFailed, ValueError, TypeError, pa.ArrowException) as exc:
        log.debug("%s: no columnar copy written (%s); the JSONL is read instead", path, exc)
        return None
    return path


def unique_keys(frame: pd.DataFrame) -> bool:
    """Does every record have a `trial_key`, and no two the same? (A copy written before this was recorded says
    nothing, and its readers look for repeats as they did.)"""
    keys = frame.get("trial_key")
    return keys is not None and bool(keys.notna().all()) and bool(keys.is_unique)


def column_kind(column: pd.Series) -> str:
    """How a parsed column is stored (NATIVE, STRING, NONE or JSON)."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in _NATIVE_KINDS:
        return NATIVE
    if isinstance(dtype, pd.StringDtype):
        return STRING
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return NONE if all(v is None for v in column.tolist()) else JSON
    raise TypeError(f"column {column.name!r} has dtype {dtype}, which a parsed trials file never gives")


def to_table(frame: pd.DataFrame) -> tuple[pa.Table, dict[str, str]]:
    """The frame as an Arrow table (JSON text where values are not one plain type), and each column's kind."""
    kinds = {str(name): column_kind(frame[name]) for name in frame.columns}
    arrays = []
    for name, kind in kinds.items():
        values = frame[name]
        if kind == NATIVE:
            arrays.append(pa.array(values.to_numpy(), from_pandas=False))  # NaN stays NaN, not null
        elif kind == STRING:
            arrays.append(pa.array(values, type=pa.large_string(), from_pandas=True))
        elif kind == NONE:
            arrays.append(pa.nulls(len(values), pa.large_string()))
        else:
            arrays.append(pa.array([None if _is_nan(v) else json.dumps(v, separators=(",", ":"))
                                    for v in values.tolist()], type=pa.large_string()))
    return pa.Table.from_arrays(arrays, names=list(kinds)), kinds


def _is_nan(value: object) -> bool:
    return type(value) is float and math.isnan(value)


def from_table(table: pa.Table, kinds: dict[str, str], rows: int) -> pd.DataFrame:
    """The frame a copy's table holds (the inverse of `to_table`)."""
    if table.num_rows != rows:
        raise ValueError(f"the copy holds {table.num_rows} rows, its stamp says {rows}")
    columns = {}
    for name in table.column_names:
        kind, column = kinds[name], table.column(name)
        if kind == NATIVE:
            columns[name] = column.to_numpy()
        elif kind == STRING:
            columns[name] = column.to_pandas()
        elif kind == NONE:
            columns[name] = np.full(rows, None, dtype=object)
        elif kind == JSON:
            columns[name] = _decode_json(column)
        else:
            raise ValueError(f"column {name!r} has an unknown encoding {kind!r}")
    return pd.DataFrame(columns, index=pd.RangeIndex(rows), columns=table.column_names)


def distinct_objects(values: list) -> tuple[np.ndarray, list]:
    """(code of each value, one value per code): values that are one object share a code. Rows read from a copy
    share one decoded value per distinct text (`_decode_json`), so a 400k-trial run's provenance has a few thousand
    codes, and a function of it costs that many calls, not 400k."""
    ids = np.fromiter(map(id, values), dtype=np.int64, count=len(values))  # the objects stay alive in `values`
    _, first, codes = np.unique(ids, return_index=True, return_inverse=True)
    return codes.reshape(-1), [values[i] for i in first]


def per_value(values: list, fn: Callable[[Any], Any]) -> list:
    """`fn` of each value, computed once per distinct object (`distinct_objects`)."""
    codes, distinct = distinct_objects(values)
    results = [fn(v) for v in distinct]
    return [results[c] for c in codes.tolist()]


def _decode_json(column: pa.ChunkedArray) -> np.ndarray:
    """One JSON text a cell -> an object array of the values (a null cell -> NaN). Each distinct text is decoded
    once, in one call, and its rows share the decoded value (a permutation or a provenance repeats across a run's
    trials): treat cell values as read-only, as every reader does."""
    encoded = column.combine_chunks()  # one dictionary for the chunks (read_copy reads JSON columns as dictionaries)
    if not pa.types.is_dictionary(encoded.type):
        encoded = encoded.dictionary_encode()
    texts = encoded.dictionary.to_pylist()
    try:
        decoded = msgspec.json.decode(("[" + ",".join(texts) + "]").encode())
    except msgspec.DecodeError:  # a NaN or Infinity inside a value: stdlib json reads it, as the JSONL's reader did
        decoded = [json.loads(t) for t in texts]
    values = np.empty(len(decoded), dtype=object)
    values[:] = decoded
    out = np.full(len(encoded), np.nan, dtype=object)
    present = encoded.indices.is_valid().to_numpy(zero_copy_only=False)
    out[present] = values[encoded.indices.drop_null().to_numpy()]
    return out
