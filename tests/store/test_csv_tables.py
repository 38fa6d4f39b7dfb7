"""store.csv_tables writes the bytes pandas' `to_csv(index=False)` writes, with each distinct float formatted once."""

from __future__ import annotations

import numpy as np
import pandas as pd

from facet_probe.store.csv_tables import arrow_wrote, float_texts, formatted_floats, write_csv

EDGE_FLOATS = [0.0, -0.0, 1.0, 0.5, 1 / 3, 2 / 3, 1e-05, 1e16, 123456789.123, -2.5, np.inf, -np.inf, np.nan,
               5e-324, 1.7976931348623157e308, 0.1 + 0.2]


def _table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "model": rng.choice(["m, with a comma", 'q"uote', "plain", "new\nline"], rows),
        "n": rng.integers(-3, 10, rows),
        "value": rng.choice(EDGE_FLOATS, rows),  # any float: not a rate, which `store.table_rules` holds to [0, 1]
        "smooth": rng.random(rows),
        "flag": rng.random(rows) < 0.5,
        "maybe": rng.choice(np.array(["x", None], dtype=object), rows),
        "share": rng.integers(0, 7, rows) / 6,
    })


def test_a_table_is_written_as_pandas_writes_it(tmp_path):
    for seed in range(3):
        frame = _table(500, seed)
        ours = write_csv(frame, tmp_path / f"ours_{seed}.csv")
        frame.to_csv(tmp_path / f"pandas_{seed}.csv", index=False)
        assert ours.read_bytes() == (tmp_path / f"pandas_{seed}.csv").read_bytes()


def test_each_edge_float_reads_as_pandas_formats_it():
    values = np.array(EDGE_FLOATS * 3)
    csv = pd.DataFrame({"value": values, "other": 0}).to_csv(index=False, header=False)
    expected = [line.split(",")[0] for line in csv.splitlines()]
    assert float_texts(values).tolist() == expected
    assert float_texts(np.array([-0.0, 0.0])).tolist() == ["-0.0", "0.0"]  # the sign of zero is kept


def test_a_float_column_is_replaced_by_its_texts_in_the_frames_order():
    frame = pd.DataFrame({"a": [1.0, np.nan], "b": ["x", "y"]}).iloc[::-1]
    out = formatted_floats(frame)
    assert out["a"].tolist() == ["", "1.0"] and out["b"].tolist() == ["y", "x"]
    assert out.index.tolist() == [1, 0] and list(out.columns) == ["a", "b"]


def test_frames_without_floats_or_with_repeated_names_are_written_unchanged(tmp_path):
    plain = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert formatted_floats(plain) is plain
    repeated = pd.DataFrame([[1.5, 2.0]], columns=["a", "a"])
    assert formatted_floats(repeated) is repeated
    assert write_csv(repeated, tmp_path / "r.csv").read_text() == repeated.to_csv(index=False)


def _clean_table(rows: int, seed: int) -> pd.DataFrame:
    """A table no text of which needs quotes: what a report's tables are."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "model": rng.choice(["m-1", "policy_07", "", "naïve ünïcode", " padded "], rows),
        "n": rng.integers(-3, 10, rows),
        "value": rng.choice(EDGE_FLOATS, rows),  # any float: not a rate, which `store.table_rules` holds to [0, 1]
        "flag": rng.random(rows) < 0.5,
        "maybe": rng.choice(np.array(["x", None, np.nan], dtype=object), rows),
        "text": pd.Series(rng.choice(["a", "b"], rows), dtype="str").where(rng.random(rows) < 0.7),
        "count": rng.integers(0, 7, rows).astype(np.uint8),
    })


def test_a_table_that_needs_no_quotes_is_written_by_arrow_with_pandas_bytes(tmp_path, monkeypatch):
    frames = [_clean_table(300, seed) for seed in range(3)] + [_clean_table(0, 0)]
    expected = [frame.to_csv(index=False).encode() for frame in frames]

    def no_pandas(*args, **kwargs):
        raise AssertionError("pandas' writer was used")

    monkeypatch.setattr(pd.DataFrame, "to_csv", no_pandas)
    for i, (frame, want) in enumerate(zip(frames, expected, strict=True)):
        assert write_csv(frame, tmp_path / f"{i}.csv").read_bytes() == want, i


def test_tables_arrow_would_write_otherwise_go_to_pandas(tmp_path):
    """A text with a comma, quote or line break (pandas quotes it), one column (pandas quotes its empty text), and
    columns whose Arrow text differs from pandas' (floats in an object column, categories, nullable booleans)."""
    for frame in (pd.DataFrame({"a": ["x,y", "z"], "b": [1, 2]}), pd.DataFrame({"a": ['say "hi"', "z"], "b": [1, 2]}),
                  pd.DataFrame({"a": ["two\nlines", "z"], "b": [1, 2]}), pd.DataFrame({"a": ["", "z"]}),
                  pd.DataFrame({"a": pd.Series([1.5, "x"], dtype=object), "b": [1, 2]}),
                  pd.DataFrame({"a": pd.Categorical(["x", "y"]), "b": [1, 2]}),
                  pd.DataFrame({"a": pd.array([True, None], dtype="boolean"), "b": [1, 2]})):
        assert not arrow_wrote(formatted_floats(frame), tmp_path / "t.csv"), frame
        assert write_csv(frame, tmp_path / "t.csv").read_text() == frame.to_csv(index=False)
