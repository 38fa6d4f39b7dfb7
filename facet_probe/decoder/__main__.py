"""`python -m facet_probe.decoder input=<sweep folder | run folders> [out=<folder>]`: the decoder-noise
decomposition of a temperature grid (docs/decoder_noise.md), written as decoder_decomposition.csv (pooled over
datasets) and decoder_decomposition_by_dataset.csv."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig

from facet_probe.app.boundary import main_entry, run_app
from facet_probe.config.schema import seed_problems
from facet_probe.core.errors import ConfigError
from facet_probe.decoder.noise import (
    ParseErrors,
    PValue,
    decomposition,
    decomposition_items,
    trial_temperatures,
)
from facet_probe.scoring.run_trials import RunTrials, read_runs
from facet_probe.store.csv_tables import write_csv
from facet_probe.store.out_folder import check
from facet_probe.store.run_folder import run_inputs

POOLED, BY_DATASET = "decoder_decomposition.csv", "decoder_decomposition_by_dataset.csv"


@dataclass
class DecoderAppConfig:
    """Top-level keys of `python -m facet_probe.decoder` (unknown keys fail at composition)."""

    input: Any = MISSING  # a sweep folder, run folders, a folder of run folders or trials files (or a list)
    out: str | None = None  # default: <folder>/decoder_noise for one input folder, else outputs/decoder_noise/<time>
    parse_errors: ParseErrors = ParseErrors.drop  # drop (FACET-PROBE) | answer (one more distinct answer)
    p_value: PValue = PValue.bootstrap  # bootstrap (FACET-PROBE) | sign_flip (the same-order control's test)
    bootstrap: int = 2000  # item-bootstrap replicates
    level: float = 0.95  # interval level
    seed: int = 42  # bootstrap seed (each row's draws are seeded by (seed, row key))
    alpha: float = 0.05  # BH level within each temperature
    parse_drift_threshold: float = 0.02  # flag |parse rate - the T=0 parse rate| above this
    progress: bool = True  # accepted as every app does (progress=false in one command line fits all); no bar here


def register() -> None:
    ConfigStore.instance().store(name="decoder_app_schema", node=DecoderAppConfig)


def inputs_of(cfg: DictConfig) -> list[Path]:
    raw = list(cfg.input) if isinstance(cfg.input, ListConfig) else [cfg.input]
    return [Path(str(p)).expanduser() for p in raw]


def check_settings(cfg: DictConfig) -> None:
    problems = []
    if cfg.bootstrap < 1:
        problems.append(f"bootstrap={cfg.bootstrap}: need bootstrap >= 1 (item-bootstrap replicates)")
    for key in ("level", "alpha"):
        if not 0.0 < cfg[key] < 1.0:
            problems.append(f"{key}={cfg[key]}: need a value between 0 and 1 (e.g. {key}=0.95)"
                            if key == "level" else f"{key}={cfg[key]}: need a value between 0 and 1 (e.g. alpha=0.05)")
    if cfg.parse_drift_threshold < 0:
        problems.append(f"parse_drift_threshold={cfg.parse_drift_threshold}: need >= 0 (e.g. 0.02)")
    problems += seed_problems(cfg, {"seed": DecoderAppConfig.seed})
    if problems:
        raise ConfigError("; ".join(problems))


def decoder_app(cfg: DictConfig) -> Path:
    """Read the runs, decompose, write both tables; refuse input with no repeats (nothing to decompose)."""
    check_settings(cfg)
    given = inputs_of(cfg)
    paths = run_inputs(given)  # a sweep folder stands for the run folders under it
    out = Path(cfg.out) if cfg.out else (
        given[0] / "decoder_noise" if len(given) == 1 and given[0].is_dir()
        else Path("outputs/decoder_noise") / datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    check(out, "the decoder app", [POOLED, BY_DATASET])  # a new or empty folder or its own: never a user's files
    runs = read_runs(paths, runs_apart=trial_temperatures)  # a file may hold a grid: one run per temperature
    items = decomposition_items(runs.trials, ParseErrors(cfg.parse_errors))
    if not items["kept"].any():
        raise ConfigError(f"{', '.join(map(str, given))}: no item has two answers to one ordering and answers to two "
                          "orderings, so there is no decoder noise to measure; run the audit with repeats >= 2 "
                          "(the paper's grid: repeats=5 'model.generation.temperature=0.0,0.7,1.0')")
    settings = dict(n_boot=cfg.bootstrap, level=cfg.level, seed=cfg.seed, p_value=PValue(cfg.p_value),
                    alpha=cfg.alpha, drift_threshold=cfg.parse_drift_threshold)
    out.mkdir(parents=True, exist_ok=True)
    tables = {POOLED: decomposition(items, by_dataset=False, **settings),
              BY_DATASET: decomposition(items, by_dataset=True, **settings)}
    for name, table in tables.items():
        write_csv(table, out / name)
    print(read_summary(runs, len(paths), items, tables[POOLED], out))
    return out


def _temperature(value: float) -> str:
    return "none" if value != value else f"{value:g}"


def read_summary(runs: RunTrials, n_inputs: int, items: pd.DataFrame, pooled: pd.DataFrame, out: Path) -> str:
    """The line saying what was read and what each temperature decomposed: every trial read, less only the trials
    of a call that another trial already holds (`share_repeated_orderings`), counted once and said."""
    read = trial_temperatures(runs.trials).value_counts(dropna=False).sort_index(na_position="last")
    used = items.groupby("temperature", dropna=False)["n_trials"].sum().reindex(read.index, fill_value=0)
    per = ", ".join(f"{_temperature(t)}: {n}" + (f" ({n - k} repeat a shared call, counted once)" if k != n else "")
                    for (t, n), k in zip(read.items(), used, strict=True))
    left = f" ({runs.left_out} stored trials of other settings left out)" if runs.left_out else ""
    temps = ", ".join(_temperature(t) for t in pooled["temperature"].drop_duplicates())
    return (f"{len(runs.trials)} trials read from {n_inputs} input(s){left}; trials per temperature: {per}; "
            f"{len(pooled)} rows at temperature(s) {temps} -> {out}")


register()


@hydra.main(config_path="../conf", config_name="decoder_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.getLogger("facet_probe").setLevel(logging.INFO)
    run_app(lambda: decoder_app(cfg), logging.getLogger("facet_probe.decoder.__main__"), announce=False)


def cli() -> None:
    """The command line (`python -m facet_probe.decoder`, the `facet-probe-decoder` script)."""
    main_entry(main)


if __name__ == "__main__":
    cli()
