"""`python -m facet_probe.report input=<run folder(s) or trials file>`: recompute metrics, tables and
figures from stored trials (merged shards, several runs, or FACET-PROBE v0.0.1 trial files), with what the
judges said in each judged input folder (its judgments.jsonl)."""

from __future__ import annotations

import logging
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import hydra
from omegaconf import DictConfig, ListConfig

from facet_probe.app.boundary import RunIncomplete, main_entry, run_app
from facet_probe.config.schema import AuditConfig, check_counts, check_seeds
from facet_probe.core.errors import ConfigError
from facet_probe.judge.run import judge_tables_of
from facet_probe.metrics.flips import INTERVAL_SEED, FewParsed
from facet_probe.report.contents import MetricRules, ReportInputs
from facet_probe.report.figure_process import HELPER_MIN_TRIALS, FigureDrawer
from facet_probe.report.provenance import run_provenance
from facet_probe.report.run import REPORT_FILE, write_outputs
from facet_probe.report.title import trials_title
from facet_probe.scoring.parsing import LetterParser
from facet_probe.scoring.rescore import rescore
from facet_probe.scoring.run_trials import combine_runs, read_run
from facet_probe.store.out_folder import check
from facet_probe.store.reading import run_inputs, trial_count_hint
from facet_probe.store.run_folder import RunFolder
from facet_probe.store.trial_store import merge_trial_files


def inputs_of(cfg: DictConfig) -> list[Path]:
    raw = cfg.input if isinstance(cfg.input, ListConfig) else [cfg.input]
    return [Path(str(p)).expanduser() for p in raw]


def merge_shards(folder: Path) -> int | None:
    """Merge a folder's shard files (and any existing trials.jsonl) into trials.jsonl."""
    run = RunFolder(folder)
    shards = run.shard_trial_files()
    if not shards:
        return None
    existing = [run.trials_file()] if run.trials_file().exists() else []
    return merge_trial_files(existing + shards, run.trials_file())


Choice = TypeVar("Choice", bound=StrEnum)


def config_choice(cfg: DictConfig, key: str, kind: type[Choice]) -> Choice:
    """The member of `kind` that config key `key` names, or one line listing the choices."""
    try:
        return kind(cfg[key])
    except ValueError:
        raise ConfigError(f"{key}={cfg[key]!r}: choose one of {', '.join(r.value for r in kind)}") from None


def few_parsed_rule(cfg: DictConfig) -> FewParsed:
    return config_choice(cfg, "few_parsed", FewParsed)


def report(cfg: DictConfig) -> Path:
    check_counts(cfg, {"bootstrap": AuditConfig.bootstrap})  # bootstrap=nan, 0: one line (the default: the audit's)
    check_seeds(cfg, {"seed": INTERVAL_SEED})  # before any input is read
    paths = inputs_of(cfg)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"input {p} does not exist (give a run folder or a trials .jsonl file)")
    paths = run_inputs(paths)  # a folder of run folders (outputs/<model>) stands for the run folders in it
    if cfg.merge_shards:
        for p in paths:
            if p.is_dir() and (n := merge_shards(p)) is not None:
                print(f"merged shards of {p} into trials.jsonl ({n} trials)")
    single_folder = len(paths) == 1 and paths[0].is_dir()
    out = Path(cfg.out) if cfg.out else (
        paths[0] if single_folder else Path("outputs/report") / datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    check(out, "the report", [REPORT_FILE], inputs=[p for p in paths if p.is_dir()])  # never over a user's files
    # a large report's figures' helper starts now, so that its imports overlap the read (`report.figure_process`)
    with FigureDrawer(helper=trial_count_hint(paths) >= HELPER_MIN_TRIALS) as drawer:
        return _report(cfg, paths, out, drawer)


def _report(cfg: DictConfig, paths: list[Path], out: Path, drawer: FigureDrawer) -> Path:
    parts = [read_run(p) for p in paths]  # one by one: each run's provenance counts its own tokens and cost
    runs = combine_runs(parts)
    folders = [p if p.is_dir() else p.parent for p in paths]
    if (letters := config_choice(cfg, "letter_parser", LetterParser)) != LetterParser.OURS:  # the reference's reading
        runs.trials = rescore(runs.trials, runs.items, letters)
    rules = MetricRules(cfg.bootstrap, cfg.seed, few_parsed_rule(cfg))
    inputs = ReportInputs(runs.trials, runs.items,
                          trials_title("report", runs.trials, [p.name for p in paths]), runs.scope, runs.left_out,
                          [run_provenance(f, part.trials) for part, f in zip(parts, folders, strict=True)],
                          judge_tables_of(folders, runs.trials))  # every folder's judges
    outputs = write_outputs(inputs, out, rules, drawer)
    print(f"{len(runs.trials)} trials, {len(outputs.summary)} cells -> {out}")
    if outputs.missing:  # incomplete: exit code 3, as the audit's (README, cli.EXIT_INCOMPLETE)
        raise RunIncomplete(out, f"{outputs.missing} expected trials are missing (report.md lists the cells, "
                                 "missing_trials.csv the items); re-run the audit command into the run folder to "
                                 "make them, then report again")
    return out


@hydra.main(config_path="../conf", config_name="report_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_app(lambda: report(cfg), logging.getLogger("facet_probe.report"), announce=False)


def cli() -> None:
    """The command line (`python -m facet_probe.report`, the `facet-probe-report` script)."""
    main_entry(main)


if __name__ == "__main__":
    cli()
