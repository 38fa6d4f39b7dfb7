"""CSV tables as pandas writes them (`to_csv(index=False)`, the same bytes), atomically and faster.

pandas formats a float column value by value (`ndarray.astype(str)`, about half of a 400k-trial report's 66k-row
item_metrics.csv); a table's float columns hold few distinct values (rates over six orderings), so each distinct
value is formatted once here, with the same call, and the text handed to pandas' writer. Hand-written because
neither pandas nor Arrow offers it: Arrow's CSV writer is faster but writes 1.0 as 1 and quotes every text field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from facet_probe.store.atomic import atomic_path

#: pandas' text for a missing value (`to_csv`'s default na_rep).
MISSING = ""


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write `frame` as `frame.to_csv(path, index=False)` would, atomically; returns `path`."""
    with atomic_path(path) as tmp:
        formatted_floats(frame).to_csv(tmp, index=False)
    return path


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
