"""An audit's run folder, owned here (inspect_ai's `log/` plays this part for its logs): the name of every file in
it, the one rule for what a run folder is (and for a folder of them), and one reader per record with one error
policy.

A damaged record (not JSON, not the shape its writer writes, an unreadable Parquet file, a bad line) is a
`RunFolderError`: one line naming the file (and line) and what to do, which every app prints alike. A record an
older or partial folder lacks is "nothing recorded": an empty `RunStatus`, no identity (its config.yaml stands for
its settings), no manifest (its trials are read as a bare file's), no items.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from facet_probe.core.errors import RunFolderError, TrialsFileError

# -- the files of a run folder ----------------------------------------------------------------------------------
CONFIG_FILE = "config.yaml"  # the resolved config, secrets redacted
ITEMS_FILE = "items.jsonl"  # the run's canonical items, one JSON object a line
MANIFEST_FILE = "manifest.parquet"  # the orderings asked, drawn once before any call
TRIALS_FILE = "trials.jsonl"  # the stored trials (a shard's: `trials.shard-<i>-of-<n>.jsonl`)
TRIALS_GLOB = "trials*.jsonl"  # every trials file of the folder, shards' included
SHARD_TRIALS_GLOB = "trials.shard-*.jsonl"
SHARDS_DIR = "shards"  # a shard's own report (`shards/<i>-of-<n>/`); trial files of the first layout (`shards/*.jsonl`)
STATUS_FILE = "run_status.json"  # what the run did and with what (`RunStatus`)
IDENTITY_FILE = "run_identity.json"  # the settings the folder was made with (`config.run_identity`)
COST_FILE = "cost.json"  # the cost ledger: every paid call's estimate and spend (`runners.cost`)
JUDGMENTS_FILE = "judgments.jsonl"  # the judges' verdicts, cached and resumable (`judge.cache`)
JUDGMENTS_TABLE = "judgments.csv"  # one row per judged trial (`judge.run.JudgeTables`, written beside the report)
SEMANTIC_FLIP_TABLE = "semantic_flip.csv"  # the judges' sem-flip per case
REPORT_FILE = "item_metrics.csv"  # the report's per-item metrics: a folder holding it has been reported
SUMMARY_FILE = "summary.csv"  # the report's per-cell table
REPORT_PAGE = "report.md"  # the report itself
ITEM_CONTROL_TABLE = "item_control.csv"  # the same-order control per item (`repeats>1`)
TRIALS_TABLE = "trials.parquet"  # every trial of the report, one row each, for pandas and the explorer
FACET_MODEL_TABLE = "facet_model.csv"  # Table 1's cells: flip per (facet, model)
MODEL_MAIN_TABLE = "model_main.csv"  # Table 1's rows: per model over its facets
PANEL_TABLE = "panel.csv"  # Table 1's panel line
SCREENED_RATES_TABLE = "screened_rates.csv"  # the image-set screen's rates per cell
GOLD_ANCHOR_TABLE = "gold_anchor.csv"  # the judges' gold match per cell
MISSING_TRIALS_TABLE = "missing_trials.csv"  # the items whose trials the run lacks

# -- what to do about each damaged record -----------------------------------------------------------------------
FIX_STATUS = ("re-run the audit command into this folder (it writes run_status.json again; the stored trials are "
              "kept and not called again), or delete it (a report then takes the models from the trials)")
FIX_IDENTITY = ("delete it and re-run the audit command into this folder (its config.yaml then stands for the "
                "settings, and the record is written again; the stored trials are kept), or run into a fresh "
                "folder (hydra.run.dir=<path>)")
FIX_MANIFEST = ("it is the run's record of what was asked: delete it and re-run the audit command into this folder "
                "(the same settings draw it again; the stored trials are kept and not called again), or run into a "
                "fresh folder (hydra.run.dir=<path>)")
FIX_ITEMS = ("re-run the audit command into this folder (it writes items.jsonl again from the dataset; the stored "
             "trials are kept and not called again), or fix that line")
FIX_TRIAL_LINE = ("the file was edited or damaged; delete that line (the other lines are kept as they are) and re-run "
                  "(a deleted trial is called again)")
FIX_CONFIG = ("delete it and re-run the audit command into this folder (it writes config.yaml again; the stored "
              "trials are kept and not called again), or run into a fresh folder (hydra.run.dir=<path>)")

#: An item's key in a run: (dataset, item id). Two datasets may share an id (the reference's hotpotqa and
#: hotpotqa_docs views of one question), so the id alone does not name an item.
ItemKey = tuple[str, str]


# -- the typed status record ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelStatus:
    """One model's entry in run_status.json: what identifies it and its trial counts (this session)."""

    fingerprint: dict[str, Any] = field(default_factory=dict)
    fingerprint_hash: str | None = None
    planned: int = 0
    called: int = 0
    errors: int = 0


@dataclass(frozen=True)
class CellStatus:
    """One (facet, dataset) cell of the run: its items and the dataset rows no item could hold, by reason."""

    facet: str | None = None
    dataset: str | None = None
    items: int | None = None
    skipped_rows: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunStatus:
    """run_status.json as read back: the fields the apps read, typed (an attack run's folder records `settings` of
    its own). The empty record is a folder's without one."""

    state: str | None = None
    started_at: str | None = None
    git_commit: str | None = None
    previous_sessions: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    models: dict[str, ModelStatus] = field(default_factory=dict)
    cells: tuple[CellStatus, ...] = ()
    dataset_shortfall: dict[str, Any] = field(default_factory=dict)  # datasets that gave fewer items than asked
    trials: int | None = None
    trials_missing: int | None = None
    errors_left: int | None = None  # what older runs recorded for trials_missing

    def fingerprint_hashes(self) -> dict[str, str]:
        """Model name -> the fingerprint hash whose trials are current (models that recorded one)."""
        return {name: m.fingerprint_hash for name, m in self.models.items() if m.fingerprint_hash}


@dataclass(frozen=True)
class _Identity:
    settings: dict[str, Any]


# -- the folder -------------------------------------------------------------------------------------------------
class _File:
    """One file of a run folder, by name: `RunFolder(path).items_file` is `path / "items.jsonl"`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, folder: RunFolder, owner: type | None = None) -> Path:
        return folder.path / self.name


@dataclass(frozen=True)
class RunFolder:
    """An audit's run folder: where each of its files is, and its records read back (each reader's policy for a
    damaged or missing file is the module's)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))  # a str is taken as its path

    config_file = _File(CONFIG_FILE)
    items_file = _File(ITEMS_FILE)
    manifest_file = _File(MANIFEST_FILE)
    status_file = _File(STATUS_FILE)
    identity_file = _File(IDENTITY_FILE)
    cost_file = _File(COST_FILE)
    judgments_file = _File(JUDGMENTS_FILE)
    report_file = _File(REPORT_FILE)

    def trials_file(self, shard: str | None = None) -> Path:
        """Where this process stores its trials: `trials.jsonl`, or `trials.shard-<i>-of-<n>.jsonl` for shard
        `i/n` (`store.shard`)."""
        if not shard:
            return self.path / TRIALS_FILE
        i, n = parse_shard(shard)
        return self.path / f"trials.shard-{i}-of-{n}.jsonl"

    def report_dir(self, shard: str | None = None) -> Path:
        """Where this process's report goes: the folder itself, or `shards/<i>-of-<n>/` for one shard of several
        (a shard's numbers never stand in the folder's summary as if they were the whole run's)."""
        if not shard or parse_shard(shard)[1] == 1:
            return self.path
        i, n = parse_shard(shard)
        return self.path / SHARDS_DIR / f"{i}-of-{n}"

    def trial_files(self) -> list[Path]:
        """Every trials file of the folder: `trials*.jsonl`, shards' included (and `shards/*.jsonl`)."""
        return sorted(self.path.glob(TRIALS_GLOB)) + sorted(self.path.glob(f"{SHARDS_DIR}/*.jsonl"))

    def shard_trial_files(self) -> list[Path]:
        """The shards' trials files (`trials.shard-*.jsonl`), which a report merges into `trials.jsonl`."""
        return sorted(self.path.glob(SHARD_TRIALS_GLOB))

    # -- the records ----------------------------------------------------------------------------------------
    def status(self) -> RunStatus:
        """run_status.json (the empty record without one)."""
        if not self.status_file.is_file():
            return RunStatus()
        return _typed(read_json_record(self.status_file, FIX_STATUS), RunStatus, self.status_file, FIX_STATUS)

    def identity(self) -> dict[str, Any] | None:
        """The settings run_identity.json records (None without one: an older folder, whose config.yaml stands
        for them)."""
        if not self.identity_file.is_file():
            return None
        record = read_json_record(self.identity_file, FIX_IDENTITY)
        return _typed(record, _Identity, self.identity_file, FIX_IDENTITY).settings

    def manifest(self, columns: Iterable[str] = ()) -> pd.DataFrame | None:
        """manifest.parquet with (at least) `columns` (None without one: trials read as a bare file's)."""
        return read_manifest(self.manifest_file, columns) if self.manifest_file.is_file() else None

    def items(self) -> dict[ItemKey, dict]:
        """items.jsonl's item records by (dataset, item id) ({} without one)."""
        return read_items([self.items_file])

    def config(self) -> DictConfig | None:
        """The resolved config.yaml (None without one)."""
        if not self.config_file.is_file():
            return None
        try:
            config = OmegaConf.load(self.config_file)
        except (YAMLError, OmegaConfBaseException, UnicodeDecodeError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RunFolderError(f"{self.config_file}: not readable YAML ({why}): the file was damaged; "
                                 f"{FIX_CONFIG}") from None
        if not isinstance(config, DictConfig):
            raise RunFolderError(f"{self.config_file}: a YAML list, not the mapping this file holds: the file was "
                                 f"damaged; {FIX_CONFIG}")
        return config


# -- what a run folder is, and a folder of them ------------------------------------------------------------------
def is_run_folder(folder: Path) -> bool:
    """The one rule: a run folder is a folder holding trials (`RunFolder.trial_files`)."""
    return Path(folder).is_dir() and bool(RunFolder(folder).trial_files())


def folders_under(root: Path, is_kind: Callable[[Path], bool] = is_run_folder) -> list[Path]:
    """`root` when it is a folder of the kind (`is_kind`, by default a run folder), else every such folder under
    it, in path order (a folder of run folders, e.g. `outputs/<model>` or a sweep, stands for the runs in it)."""
    root = Path(root)
    if is_kind(root):
        return [root]
    return sorted(folder for folder in (Path(d) for d, _, _ in os.walk(root)) if is_kind(folder))


def run_inputs(inputs: str | Path | Iterable[str | Path]) -> list[Path]:
    """Files and run folders as given, each other folder expanded to the run folders under it (`folders_under`); a
    path that does not exist, or a folder holding none, is an error saying what to give."""
    if isinstance(inputs, str | Path):
        inputs = [inputs]
    out: list[Path] = []
    for raw in inputs:
        path = Path(raw).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such run folder or trials file (give a run folder, a folder of "
                                    "run folders or a trials .jsonl file)")
        runs = [path] if path.is_file() else folders_under(path)
        if not runs:
            raise FileNotFoundError(f"{path} holds neither trials (trials*.jsonl) nor run folders (is it a run "
                                    "folder?); give an audit's run folder (outputs/<model>/<scope>/<mode>) or a "
                                    "folder above some")
        out.extend(runs)
    return out


def parse_shard(shard: str) -> tuple[int, int]:
    """`store.shard` 'i/n' as (i, n), or a ValueError saying what it must look like."""
    try:
        i, n = (int(x) for x in str(shard).split("/"))
    except ValueError:
        raise ValueError(f"store.shard must look like 'i/n' (e.g. 0/4), got {shard!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"store.shard {shard!r}: need 0 <= i < n")
    return i, n


# -- the readers, one error policy --------------------------------------------------------------------------------
#: JSON's names for what a line can hold besides an object.
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "true/false", type(None): "null"}


def json_kind(value: object) -> str:
    """What JSON calls a decoded value ('array', 'string', ...)."""
    return _JSON_KINDS.get(type(value), type(value).__name__)


def not_a_record(path: Path, lineno: int, rec: object, fields: Iterable[str], what: str = "trial",
                 fix: str = FIX_TRIAL_LINE, error: type[TrialsFileError] = TrialsFileError) -> TrialsFileError:
    """The `error` for a line that is JSON but not a `what` record (an array, a number, an object without
    `fields`)."""
    if isinstance(rec, dict):
        kind = "a JSON object without " + ", ".join(repr(f) for f in fields if f not in rec)
    else:
        kind = f"a JSON {json_kind(rec)}"
    return error(f"{path}:{lineno}: not a{'n' if what[0] in 'aeiou' else ''} {what} record ({kind}); {fix}")


def read_json_record(path: Path, fix: str) -> dict:
    """A JSON record of a run folder (`run_identity.json`, `run_status.json`) as a dict; a damaged one is a
    RunFolderError naming the file and line and saying `fix`."""
    data = path.read_bytes()
    try:
        rec = json.loads(data)
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({_why(exc)}): the file was "
                             f"damaged; {fix}") from None
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        raise RunFolderError(f"{path}:{lineno}: not UTF-8 text: the file was damaged; {fix}") from None
    if not isinstance(rec, dict):
        raise RunFolderError(f"{path}:1: a JSON {json_kind(rec)}, not the object this file holds: the file was "
                             f"damaged; {fix}")
    return rec


Record = TypeVar("Record")


def _typed(record: dict, kind: type[Record], path: Path, fix: str) -> Record:
    """`record` as its typed `kind` (fields it does not know are left out); a field of another JSON type than its
    writer writes is a RunFolderError naming it."""
    try:
        return msgspec.convert(record, kind)
    except msgspec.ValidationError as exc:
        raise RunFolderError(f"{path}: not the record this file holds ({exc}): the file was damaged; {fix}") from None


def read_items(paths: Iterable[Path]) -> dict[ItemKey, dict]:
    """Item records (as JSON dicts) by (dataset, item id) from the given items.jsonl files (one that does not exist
    holds none); a damaged line is a RunFolderError naming it."""
    items: dict[ItemKey, dict] = {}
    for path in paths:
        if path.is_file():
            with path.open("rb") as fh:
                for lineno, line in enumerate(fh, 1):
                    if line.strip():
                        rec = json_line(path, lineno, line, FIX_ITEMS)
                        if not isinstance(rec, dict) or "dataset" not in rec or "item_id" not in rec:
                            raise not_a_record(path, lineno, rec, ("dataset", "item_id"), "item", FIX_ITEMS,
                                               RunFolderError)
                        items[(rec["dataset"], rec["item_id"])] = rec
    return items


def read_manifest(path: Path, columns: Iterable[str]) -> pd.DataFrame:
    """A run folder's manifest.parquet with (at least) `columns`; a damaged one is a RunFolderError saying what
    to do."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError, its IO errors OSErrors
        why = str(exc).split(f"{path}': ")[-1].split(". ")[0]  # pyarrow's reason, less the path it repeats
        raise RunFolderError(f"{path}: not a readable Parquet file ({why}); {FIX_MANIFEST}") from None
    missing = [c for c in columns if c not in frame]
    if missing:
        raise RunFolderError(f"{path}: a manifest without the columns {', '.join(map(repr, missing))}; "
                             f"{FIX_MANIFEST}")
    return frame


def json_line(path: Path, lineno: int, line: bytes, fix: str) -> object:
    """One line of a JSONL record file, decoded; one that is not JSON (or not UTF-8) is a RunFolderError naming
    the file, line and column."""
    try:
        return json.loads(line.rstrip(b"\r\n"))  # a string cut at the line end is unterminated, not a control character
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}:{lineno}:{exc.colno}: not valid JSON ({_why(exc)}); {fix}") from None
    except UnicodeDecodeError as exc:
        raise RunFolderError(f"{path}:{lineno}: not UTF-8 text (byte {line[exc.start]:#04x} at column "
                             f"{exc.start + 1}); {fix}") from None


def _why(exc: json.JSONDecodeError) -> str:
    """json's reason without its dangling 'at' ('Unterminated string starting at' -> '... starting')."""
    return exc.msg.removesuffix(" at")
