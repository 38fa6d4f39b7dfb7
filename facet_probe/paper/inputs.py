"""Find the run folders under a paper target's input and read what their reports wrote (the report
decides each item's metrics: screened image-set items, the primary judge's sem-flip); refuse two runs that
answer the same cell, so no table mixes runs silently."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from facet_probe.core.errors import ConfigError
from facet_probe.judge.tables import item_flips
from facet_probe.metrics.flips import CELL_KEYS

REPORT_FILE = "item_metrics.csv"


class MissingInput(ConfigError):
    """The inputs hold nothing a target reads (no audit run, no judged cell, no decoder grid, no ODI fit)."""


def run_folders(inputs: str | Path | Iterable[str | Path]) -> list[Path]:
    """Every reported audit run folder under the inputs (a run folder, a sweep, a folder of them); shard
    sub-reports are left to their merged run, and a sweep root's cross-model report to the jobs' own."""
    paths = [Path(inputs)] if isinstance(inputs, str | Path) else [Path(p) for p in inputs]
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise ConfigError(f"input {path} does not exist; give a run folder or a folder of run folders")
        hits = [path] if is_run_folder(path) else sorted(
            p.parent for p in path.rglob(REPORT_FILE)
            if "shards" not in p.relative_to(path).parts and is_run_folder(p.parent))
        found += hits
    if not found:
        raise MissingInput(f"no reported run folder under {', '.join(map(str, paths))} (none holds {REPORT_FILE} and run_status.json); "
                          "run `python -m facet_probe ...` first, or `python -m facet_probe.report input=<run>`")
    return found


def is_run_folder(folder: Path) -> bool:
    """An audit's run folder with its report: not a sweep root's cross-model report (which names a model
    per job and would answer every cell twice) nor a report app's `out=` over several runs."""
    return (folder / REPORT_FILE).is_file() and (folder / "run_status.json").is_file()


def folder_items(folder: Path) -> pd.DataFrame:
    """The report's per-item metrics with Table 1's `flip` and `flip_source` (`judge.tables.item_flips`: the
    primary judge's sem-flip where the folder was judged, else exact any_flip) and the run folder."""
    items = pd.read_csv(folder / REPORT_FILE, dtype={"item_id": str})
    return item_flips(items, folder / "semantic_flip.csv").assign(run=str(folder))


def read_items(inputs) -> pd.DataFrame:
    """Every run's per-item metrics, refusing a cell that two runs answer."""
    return one_run_per_cell(pd.concat([folder_items(f) for f in run_folders(inputs)], ignore_index=True))


def one_run_per_cell(frame: pd.DataFrame, by: tuple[str, ...] = ()) -> pd.DataFrame:
    """`frame` (with a `run` column), refused when two runs answer one (model, facet, dataset) cell (under one
    value of each `by` column: a setting two runs are meant to differ in)."""
    keys = [*CELL_KEYS, *by]
    runs = frame.groupby(keys, observed=True)["run"].nunique()
    if (twice := runs[runs > 1]).any():
        cell = tuple(map(str, twice.index[0]))
        folders = sorted(frame.loc[(frame[keys].astype(str) == list(cell)).all(axis=1), "run"].unique())
        raise ConfigError(f"cell {'/'.join(cell)} is answered by {len(folders)} runs ({', '.join(folders)}); a table "
                          "reads one run per cell: give input= the runs of one setting (or a list of folders)")
    return frame


def model_ids(inputs) -> dict[str, str]:
    """Configured model name -> the model id its runs recorded (to line our rows up with published ones)."""
    ids: dict[str, str] = {}
    for folder in run_folders(inputs):
        status = folder / "run_status.json"
        if status.is_file():
            for name, model in (json.loads(status.read_text()).get("models") or {}).items():
                model_id = (model.get("fingerprint") or {}).get("model_id")
                if model_id:
                    ids[name] = str(model_id).rsplit("/", 1)[-1]
    return ids


def read_trials(inputs) -> pd.DataFrame:
    """The runs' trials (through `scoring.run_trials.read_run`: one run's settings each), less the items the report's
    image-set screen drops, so policies and tables count the same items."""
    from facet_probe.report.run import screened_out
    from facet_probe.scoring.run_trials import read_run
    from facet_probe.store.reading import item_keys_in
    from facet_probe.store.reading import read_items as read_item_records

    frames = []
    for folder in run_folders(inputs):
        trials = read_run(folder).trials
        dropped = screened_out(read_item_records([folder / "items.jsonl"]))
        kept = trials[~item_keys_in(trials, dropped)] if dropped else trials
        frames.append(kept.assign(run=str(folder)))
    return one_run_per_cell(pd.concat(frames, ignore_index=True))


def run_setting(folder: Path, key: str):
    """The value of a config key (`prompt.cot`) in a run folder's resolved `config.yaml` (None if absent)."""
    from omegaconf import OmegaConf

    path = folder / "config.yaml"
    return OmegaConf.select(OmegaConf.load(path), key) if path.is_file() else None


def read_items_by_setting(inputs, key: str) -> pd.DataFrame:
    """Every run's per-item metrics with `setting` = its value of `key`; one run per cell and setting."""
    frames = [folder_items(f).assign(setting=run_setting(f, key)) for f in run_folders(inputs)]
    return one_run_per_cell(pd.concat(frames, ignore_index=True), by=("setting",))
