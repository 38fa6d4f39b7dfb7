"""One split of a dataset the user brings, as a table: local parquet, JSON or CSV files, or a hub dataset from the
`datasets` cache.

Local files are read with pyarrow; a hub id needs the optional `[datasets]` extra. Used by `dataset=hf`
(hf_columns.py), and by `dataset=lm_eval` to find a local copy's files for lm-eval's own reader (lm_eval_task.py)."""

from __future__ import annotations

import json
from glob import glob, has_magic
from pathlib import Path

import pyarrow as pa

from facet_probe.core.errors import ConfigError
from facet_probe.core.extras import require
from facet_probe.datasets.base import DatasetUnavailable

#: File suffix -> the `datasets` builder that reads it (lm-eval's `dataset_path` for local files).
FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def is_local(path: str) -> bool:
    """Whether `path` names local files (an existing file or folder, or a glob) rather than a hub id."""
    return has_magic(path) or Path(path).expanduser().exists() or not hub_like(path)


def hub_like(path: str) -> bool:
    """`org/name`: the form of a hub dataset id."""
    parts = path.split("/")
    return len(parts) == 2 and all(parts) and not path.startswith((".", "~"))


def in_split(rel: Path, split: str) -> bool:
    """Whether a data file belongs to `split` by the hub's naming: `<split>.jsonl`, `<split>-00000-of-00001.parquet`,
    `<split>_x.csv`, or any file under a folder named `<split>`."""
    stem = rel.name.split(".")[0]
    return stem == split or stem.startswith((f"{split}-", f"{split}_")) or split in rel.parts[:-1]


def split_files(path: str, split: str, subset: str | None = None) -> list[Path]:
    """The data files of `split` under `path`: the file itself, a glob's matches, or in a folder (its `subset`
    subfolder when there is one) the files named for the split; one line listing what is there otherwise."""
    if has_magic(path):
        found = sorted(Path(f) for f in glob(str(Path(path).expanduser()), recursive=True))
        files = [f for f in found if f.suffix in FORMATS]
        if not files:
            raise DatasetUnavailable(f"dataset.path={path} matches no {'/'.join(FORMATS)} file")
        return files
    root = Path(path).expanduser()
    if root.is_file():
        if root.suffix not in FORMATS:
            raise ConfigError(f"dataset.path={path}: a {root.suffix or 'suffix-less'} file; give a "
                              f"{', '.join(FORMATS)} file or a folder of them")
        return [root]
    if not root.is_dir():
        raise DatasetUnavailable(f"dataset.path={path}: no such file or folder")
    if subset and (root / subset).is_dir():
        root = root / subset
    data = sorted(f for f in root.rglob("*") if f.suffix in FORMATS and f.is_file())
    files = [f for f in data if in_split(f.relative_to(root), split)]
    if not files:
        shown = ", ".join(str(f.relative_to(root)) for f in data[:8]) or "none"
        raise DatasetUnavailable(f"dataset.path={path}: no file of split {split!r} in {root} (a file named "
                                 f"{split}.<ext> or {split}-*.<ext>, or a folder {split}/; data files there: "
                                 f"{shown}); set dataset.split= or give the file itself as dataset.path")
    return files


def file_format(files: list[Path]) -> str:
    """The one `datasets` builder that reads all of `files` (parquet, json or csv)."""
    formats = {FORMATS[f.suffix] for f in files}
    if len(formats) > 1:
        raise ConfigError(f"the split's files mix formats ({', '.join(sorted(formats))}): {', '.join(map(str, files))}; "
                          "keep one format per split")
    return formats.pop()


def read_file(file: Path) -> pa.Table:
    """One local data file as a table (a JSON file: JSON lines, or one array of row objects)."""
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(file)
    if file.suffix == ".csv":
        import pyarrow.csv as pcsv

        # an empty cell is an empty text, not a missing value ("NA" stays "NA"); numbers are read as numbers
        return pcsv.read_csv(file, convert_options=pcsv.ConvertOptions(strings_can_be_null=False, null_values=[""]))
    text = file.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{file}: expected one JSON object per row")
    return pa.Table.from_pylist(rows)


def local_table(files: list[Path]) -> pa.Table:
    """The split's files as one table, in file order."""
    tables = [read_file(f) for f in files]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ConfigError(f"the split's files do not share their columns ({exc}); give one file as dataset.path") from None


def hub_table(repo: str, subset: str | None, split: str) -> pa.Table:
    """A hub dataset's split read by `datasets` (its cache; the hub only when the network is allowed), images kept
    as stored (`{bytes, path}`), not decoded."""
    datasets = require("datasets", "datasets", f"dataset.path={repo} (a hub id)", "the datasets library",
                       instead="give a local copy: dataset.path=<folder or file>")
    try:
        ds = datasets.load_dataset(repo, subset, split=split)
    except (ConnectionError, FileNotFoundError, ValueError) as exc:
        raise DatasetUnavailable(f"dataset.path={repo}: {subset or 'the default subset'}, split {split} could not "
                                 f"be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                                 "fetch it where the network is allowed, or give a local copy: "
                                 "dataset.path=<folder or file>") from None
    return ds.with_format("arrow")[:]
