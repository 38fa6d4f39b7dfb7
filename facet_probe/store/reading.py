"""Reading stored trials: the trial JSONL files (ours or FACET-PROBE v0.0.1, shards) of run folders
(`store.run_folder` says which files those are) and of trials files given alone.

Readers tolerate a torn last line (a crash mid-write) and de-duplicate by trial key, keeping the
latest successful record, so merged shards and resumed runs never double-count.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from facet_probe.core.errors import TrialsFileError
from facet_probe.core.trials import KEY_VERSION, PARSE_ERROR, SCORER_VERSION
from facet_probe.store import columnar
from facet_probe.store.run_folder import (  # noqa: F401 (the run folder's readers, imported from here too)
    FIX_TRIAL_LINE,
    TRIALS_FILE,
    ItemKey,
    RunFolder,
    not_a_record,
    read_items,
    read_manifest,
    run_inputs,
)

log = logging.getLogger(__name__)

#: What every trial record has, ours and FACET-PROBE v0.0.1's: a line without them is not a trial.
TRIAL_FIELDS = ("facet", "dataset", "item_id", "ordering_idx")
_TRIAL_FIELDS = frozenset(TRIAL_FIELDS)


def folder_trial_files(folder: Path) -> list[Path]:
    """A run folder's trial files (`RunFolder.trial_files`)."""
    return RunFolder(folder).trial_files()


def trial_files(inputs: str | Path | Iterable[str | Path]) -> list[Path]:
    """Expand run folders (all `trials*.jsonl` inside, shards included), folders of run folders and files into
    a file list."""
    files: list[Path] = []
    for path in run_inputs(inputs):
        files.extend(RunFolder(path).trial_files() if path.is_dir() else [path])
    return files


def iter_records(path: Path) -> Iterator[dict]:
    """Records of one JSONL file; a torn (unterminated, unparseable) last line is skipped with a warning."""
    yield from read_records(path)


#: The warning of a read that skips a file's torn last line.
TORN_TAIL = "%s: ignoring a torn last line (a run was interrupted mid-write)"
#: Bytes decoded per chunk by `read_records` (a chunk ends at a line end).
CHUNK_BYTES = 1 << 24


def read_records(path: Path) -> list[dict]:
    """Every record of one JSONL file, decoded in chunks with msgspec (a few times faster than `json`);
    a chunk it refuses (a torn tail, a damaged line, NaN) is read again line by line with `json`, so the
    rules stay `json`'s: a torn last line is skipped with a warning, a damaged line before it is an error."""
    return [rec for chunk in _record_chunks(Path(path)) for rec in chunk]


def _record_chunks(path: Path, data: bytes | None = None) -> Iterator[list[dict]]:
    data = path.read_bytes() if data is None else data
    for start, end in _chunks(data):
        try:
            yield _DECODER.decode_lines(data[start:end])
        except msgspec.DecodeError:
            yield list(_slow_records(path, data, start, end))


def _frame_of(files: list[Path], want: Callable[[str], bool] | None = None) -> tuple[pd.DataFrame | None, bool]:
    """The records of the files as one frame (only the columns `want` keeps, where given): each file's frame from
    its columnar copy where that copy is current (`store.columnar`), else parsed (`_parsed_frame`, which leaves a
    fresh copy), put together as one frame of every record would be (`combine_frames`); and whether its trial keys
    are known to be unique (one file, whose copy found them so)."""
    read = [f for f in (_file_frame(path, want) for path in files) if f is not None]
    return combine_frames([frame for frame, _ in read]), len(read) == 1 and read[0][1]


def _file_frame(path: Path, want: Callable[[str], bool] | None = None) -> tuple[pd.DataFrame, bool] | None:
    """One trials file's frame, from its copy when current (with the copy's word on its keys: `Copy.unique_keys`);
    else parsed, and a copy written for the next read (files of at least `columnar.MIN_BYTES`; best effort)."""
    copy = columnar.read_copy(path, want)
    if copy is not None:
        if copy.torn_tail:
            log.warning(TORN_TAIL, path)
        check_versions(path, copy.frame)
        return copy.frame, copy.unique_keys
    data = path.read_bytes()
    frame = _parsed_frame(path, data)
    if frame is None:
        return None
    check_versions(path, frame)
    if len(data) >= columnar.MIN_BYTES:
        columnar.write_copy(path, frame, columnar.stamp_of(data), torn_tail=_torn_tail(data))
    return (frame if want is None else frame[[c for c in frame.columns if want(c)]]), False


def _parsed_frame(path: Path, data: bytes) -> pd.DataFrame | None:
    """A trials file's records (its bytes `data`) as one frame, built a chunk at a time (the chunk's dicts are
    freed once its frame is built: about half the peak memory of one frame from every record). Where the chunks'
    column types differ, the frame is built from every record at once instead, so the types are what they always
    were."""
    frames = [pd.DataFrame.from_records(_trials_only(path, chunk)) for chunk in _record_chunks(path, data) if chunk]
    if not frames:
        return None
    if len(frames) == 1 or _uniform(frames):
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    del frames
    return pd.DataFrame.from_records([rec for chunk in _record_chunks(path, data) for rec in chunk])


def _uniform(frames: list[pd.DataFrame]) -> bool:
    """Do the frames have the same columns, each of one dtype?"""
    columns = {c for f in frames for c in f.columns}
    return all(len({str(f[c].dtype) if c in f else "absent" for f in frames}) == 1 for c in columns)


def combine_frames(frames: list[pd.DataFrame]) -> pd.DataFrame | None:
    """Files' frames as one frame with the columns and types one frame of all their records would have: concatenated
    where they agree; a column whose types differ between files (or that some lack) is inferred again from its
    values, as `DataFrame.from_records` infers it (a file's missing column is NaN, as a record's missing key is)."""
    if not frames:
        return None
    if len(frames) == 1:
        return frames[0]
    if _uniform(frames):
        return pd.concat(frames, ignore_index=True)
    names = list(dict.fromkeys(c for f in frames for c in f.columns))
    columns = {}
    for name in names:
        parts = [f.get(name) for f in frames]
        if all(p is not None for p in parts) and len({str(p.dtype) for p in parts}) == 1:
            columns[name] = pd.concat(parts, ignore_index=True)
        else:
            values = [v for p, f in zip(parts, frames, strict=True)
                      for v in (p.tolist() if p is not None else [np.nan] * len(f))]
            columns[name] = pd.Series(values)
    return pd.DataFrame(columns, columns=names)


def _torn_tail(data: bytes) -> bool:
    """Does the file end in a torn line (unterminated and not JSON: skipped, with a warning, by every read)?"""
    tail = data[data.rfind(b"\n") + 1:]
    if not tail.strip():
        return False
    try:
        json.loads(tail)
    except ValueError:
        return True
    return False


#: {version field of a trial record: the newest this facet_probe writes}: its key scheme and its scorer. A record
#: of a later one was written by a newer facet_probe, whose keys or scores this one would misread.
NEWEST_VERSIONS = {"key_version": KEY_VERSION, "scorer_version": SCORER_VERSION}


def newer_field(rec: Mapping[str, Any]) -> tuple[str, int] | None:
    """(field, value) of the first version of a record later than this facet_probe's, or None."""
    for field, newest in NEWEST_VERSIONS.items():
        value = rec.get(field)
        if isinstance(value, int) and value > newest:
            return field, value
    return None


def newer_than_this(path: Path, lineno: int, field: str, value: int) -> TrialsFileError:
    """The error for a trial line a newer facet_probe wrote (`newer_field`): the file is left as it is."""
    return TrialsFileError(f"{path}:{lineno}: written by a newer facet_probe ({field} {value}; this facet_probe "
                           f"writes {field} {NEWEST_VERSIONS[field]} and reads no later one): upgrade facet_probe "
                           "(pip install -U facet_probe) to read this run folder, or run into a fresh folder; the "
                           "file is left as it is")


def check_versions(path: Path, frame: pd.DataFrame) -> None:
    """Refuse a trials file (as its frame) holding a record a newer facet_probe wrote, naming its first such line."""
    if not any(field in frame and (pd.to_numeric(frame[field], errors="coerce") > newest).any()
               for field, newest in NEWEST_VERSIONS.items()):
        return
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a damaged line is another error, said where it is read
            if isinstance(rec, dict) and (found := newer_field(rec)) is not None:
                raise newer_than_this(path, lineno, *found)


def _is_trial(rec: object) -> bool:
    return type(rec) is dict and rec.keys() >= _TRIAL_FIELDS


def _trials_only(path: Path, chunk: list) -> list[dict]:
    """`chunk` when every record in it is a trial; else the error naming the file's first line that is not."""
    if all(map(_is_trial, chunk)):
        return chunk
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                rec = json.loads(line) if line.strip() else {}
            except ValueError:
                continue  # a torn tail (any other undecodable line was refused when the chunk was read)
            if line.strip() and not _is_trial(rec):
                raise not_a_record(path, lineno, rec, TRIAL_FIELDS)
    raise TrialsFileError(f"{path}: holds a record that is not a trial; {FIX_TRIAL_LINE}")  # the file changed meanwhile


_DECODER = msgspec.json.Decoder()


def _chunks(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) byte ranges of about CHUNK_BYTES that end just after a newline (or at the end)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + CHUNK_BYTES, len(data)) - 1)
        end = len(data) if end < 0 else end + 1
        yield start, end
        start = end


def _slow_records(path: Path, data: bytes, start: int, end: int) -> Iterator[dict]:
    lines = data[start:end].split(b"\n")
    first = data.count(b"\n", 0, start) + 1
    at_end = end == len(data)
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:  # not JSON, or not UTF-8 text
            if at_end and n == len(lines) - 1:  # the unterminated tail; a terminated bad line is an error
                log.warning(TORN_TAIL, path)
                continue
            if first + n == 1:
                raise TrialsFileError(
                    f"{path}:1: not a trials file (its first line is not JSON): give a run folder or a trials .jsonl "
                    "file; if it is one, its first line was damaged: fix or delete that line and re-run") from None
            raise TrialsFileError(
                f"{path}:{first + n}: malformed trial line (not JSON) before the end of the file, so not a torn "
                "write: the file was edited or damaged; fix or delete that line and re-run (a deleted trial "
                "is called again)") from None


#: Bytes a trial takes in a trials file, for `trial_count_hint` where a file has no columnar copy (about 980 at
#: 400k trials of the offline panel; a model that writes at length takes more, and is counted low).
TRIAL_BYTES_HINT = 1_000


def trial_count_hint(inputs: str | Path | Iterable[str | Path]) -> int:
    """About how many trials the inputs hold, before reading them: each file's columnar copy's rows, else its size
    over `TRIAL_BYTES_HINT`. For choices made before the read (a report's figures' helper), never for counting."""
    return sum(columnar.copy_rows(f) or f.stat().st_size // TRIAL_BYTES_HINT for f in trial_files(inputs))


#: Columns of a record without a trial key that say which settings answered it (a FACET-PROBE grid file's
#: `temperature`): part of its derived key, so one file of several temperatures keeps every temperature's trials.
SETTING_COLUMNS = ("temperature",)
#: The columns `load_trial_frame` reads whatever `columns` asks for: those it keys, filters and fills from.
FRAME_COLUMNS = (*TRIAL_FIELDS, "model", "repeat_idx", "trial_key", "error", "answer_normalized", "parse_status",
                 *SETTING_COLUMNS, "key_version", "scorer_version")  # the versions: `check_versions`


def load_trial_frame(inputs: str | Path | Iterable[str | Path], columns: Iterable[str] | None = None,
                     drop: Iterable[str] = ()) -> pd.DataFrame:
    """All trials from the inputs as one DataFrame, one row per trial (errors and duplicates removed), each file's
    from its columnar copy where that is current (`store.columnar`); only `columns` where given, less `drop` (a
    reader that needs neither provenance nor usage drops them), FRAME_COLUMNS always.

    Records from the FACET-PROBE reference (no `trial_key`, no `repeat_idx`, no `parse_status`) get
    repeat 0, a key derived from (model, facet, dataset, item_id, ordering_idx, repeat) and a parse
    status from their answer (null or empty = parse error).
    """
    # every record a trial (TRIAL_FIELDS), or the line that is not is named
    frame, unique = _frame_of(trial_files(inputs), column_filter(columns, drop))
    if frame is None:
        raise TrialsFileError(f"no trials found in {inputs}")
    if "model" not in frame:
        frame["model"] = ""
    frame["repeat_idx"] = (frame["repeat_idx"].fillna(0) if "repeat_idx" in frame else 0)
    frame["repeat_idx"] = frame["repeat_idx"].astype(int)
    if "trial_key" not in frame:
        frame["trial_key"] = _derived_keys(frame)
    elif (keyless := frame["trial_key"].isna()).any():  # only the keyless rows' keys are built (400k-trial reads)
        frame["trial_key"] = frame["trial_key"].fillna(_derived_keys(frame[keyless]))
    if "error" in frame and (failed := frame["error"].notna()).any():  # no copy of 400k rows when none failed
        frame = frame[~failed]
    answer = frame["answer_normalized"] if "answer_normalized" in frame else pd.Series(None, index=frame.index)
    status = pd.Series(np.where(answer.isna() | answer.isin(["", PARSE_ERROR]), "parse_error", "ok"),
                       index=frame.index)
    frame["parse_status"] = frame["parse_status"].fillna(status) if "parse_status" in frame else status
    # drop_duplicates, copying only when it drops; not looked for where one file's copy found none
    if not unique and (again := frame.duplicated("trial_key", keep="last")).any():
        frame = frame[~again]
    return frame.reset_index(drop=True)


def column_filter(columns: Iterable[str] | None, drop: Iterable[str] = ()) -> Callable[[str], bool] | None:
    """Which stored columns a read keeps: `columns` (all where None) less `drop`, and FRAME_COLUMNS always."""
    keep = None if columns is None else frozenset((*columns, *FRAME_COLUMNS))
    dropped = frozenset(drop) - set(FRAME_COLUMNS)
    if keep is None and not dropped:
        return None
    return lambda name: (keep is None or name in keep) and name not in dropped


def _derived_keys(frame: pd.DataFrame) -> pd.Series:
    """The key of a record without one: (model, facet, dataset, item_id, ordering_idx, repeat) joined by '|', and
    `|<column>=<value>` for each of its SETTING_COLUMNS that is set (a record at another temperature is another
    trial; a resumed run's record at the same one replaces it)."""
    keys = (frame["model"].fillna("").astype(str) + "|" + frame["facet"].astype(str) + "|"
            + frame["dataset"].astype(str) + "|" + frame["item_id"].astype(str) + "|"
            + frame["ordering_idx"].astype(str) + "|" + frame["repeat_idx"].astype(str))
    for column in (c for c in SETTING_COLUMNS if c in frame):
        value = frame[column]
        keys = keys + ("|" + column + "=" + value.astype(str)).where(value.notna(), "")
    return keys


def item_keys_in(frame: pd.DataFrame, keys: Iterable[ItemKey]) -> pd.Series:
    """Which rows of a trial or item frame belong to one of the items `keys` names."""
    index = pd.MultiIndex.from_frame(frame[["dataset", "item_id"]].astype(str))
    return pd.Series(index.isin(list(keys)), index=frame.index)
