"""Find the run folders under a paper target's input and read what their reports wrote (the report
decides each item's metrics: screened image-set items, the primary judge's sem-flip); refuse two runs that
answer the same cell, so no table mixes runs silently."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from facet_probe.core.errors import ConfigError
from facet_probe.judge.tables import item_flips
from facet_probe.metrics.flips import CELL_KEYS
from facet_probe.store.run_folder import (  # noqa: F401 (REPORT_FILE: imported from here too)
    REPORT_FILE,
    SEMANTIC_FLIP_TABLE,
    RunFolder,
    folders_under,
)

log = logging.getLogger("facet_probe.paper")


class MissingInput(ConfigError):
    """The inputs hold nothing a target reads (no audit run, no judged cell, no decoder grid, no ODI fit)."""


def run_folders(inputs: str | Path | Iterable[str | Path]) -> list[Path]:
    """Every reported run folder under the inputs (a run folder, a sweep, a folder of them:
    `store.run_folder.folders_under`); a run folder with no report yet is left out, with a warning that says how
    to report it. Reports that are no run folder's (a shard's sub-report, a sweep root's cross-model report, a
    report app's `out=` over several runs) hold no trials and are not read."""
    paths = [Path(inputs)] if isinstance(inputs, str | Path) else [Path(p) for p in inputs]
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise ConfigError(f"input {path} does not exist; give a run folder or a folder of run folders")
        runs = folders_under(path)
        if unreported := tuple(f for f in runs if not is_reported(f)):
            say_unreported(path, unreported)
        found += [f for f in runs if is_reported(f)]
    if not found:
        raise MissingInput(f"no reported run folder under {', '.join(map(str, paths))} (none holds trials and "
                           f"{REPORT_FILE}); run `python -m facet_probe ...` first, or `python -m facet_probe.report "
                           "input=<run>`")
    return found


@functools.cache  # once per process: every target looks for the run folders again
def say_unreported(root: Path, unreported: tuple[Path, ...]) -> None:
    """Warn that the run folders `unreported` under `root` are left out for want of a report."""
    shown = ", ".join(map(str, unreported[:3])) + (" ..." if len(unreported) > 3 else "")
    log.warning("%d run folder(s) under %s have no report (%s), left out: %s; report each with `python -m "
                "facet_probe.report input=<run folder>`", len(unreported), root, REPORT_FILE, shown)


def is_reported(folder: Path) -> bool:
    """Has the run folder's report been written into it (the per-item metrics the paper reads)?"""
    return RunFolder(folder).report_file.is_file()


def folder_items(folder: Path) -> pd.DataFrame:
    """The report's per-item metrics with Table 1's `flip` and `flip_source` (`judge.tables.item_flips`: the
    primary judge's sem-flip where the folder was judged, else exact any_flip) and the run folder."""
    items = pd.read_csv(RunFolder(folder).report_file, dtype={"item_id": str})
    return item_flips(items, folder / SEMANTIC_FLIP_TABLE).assign(run=str(folder))


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


def read_trials(inputs) -> pd.DataFrame:
    """The runs' trials (through `scoring.run_trials.read_run`: one run's settings each), less the items the report's
    image-set screen drops, so policies and tables count the same items."""
    from facet_probe.report.screening import screened_out
    from facet_probe.scoring.run_trials import read_run
    from facet_probe.store.reading import item_keys_in

    frames = []
    for folder in run_folders(inputs):
        run = read_run(RunFolder(folder))
        trials, dropped = run.trials, screened_out(run.items)
        kept = trials[~item_keys_in(trials, dropped)] if dropped else trials
        frames.append(kept.assign(run=str(folder)))
    return one_run_per_cell(pd.concat(frames, ignore_index=True))


def run_setting(folder: Path, key: str) -> Any:
    """The value of a config key (`prompt.cot`) in a run folder's resolved `config.yaml` (None if absent)."""
    from omegaconf import OmegaConf

    config = RunFolder(folder).config()
    return None if config is None else OmegaConf.select(config, key)


def read_items_by_setting(inputs, key: str) -> pd.DataFrame:
    """Every run's per-item metrics with `setting` = its value of `key`; one run per cell and setting."""
    frames = [folder_items(f).assign(setting=run_setting(f, key)) for f in run_folders(inputs)]
    return one_run_per_cell(pd.concat(frames, ignore_index=True), by=("setting",))
