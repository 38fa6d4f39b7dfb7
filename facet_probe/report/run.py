"""Trials -> the run folder's tables, figures, report.md and explorer.html (used after a run and by
re-reporting; see docs/report.md): the order in which a report's files are computed and written.

What is computed lives beside it: the image-set screen (`report.screening`), the cell metrics (`report.summary`),
what the judges add (`report.judge_join`), what is missing (`report.completeness`), report.md (`report.markdown`),
trials.parquet (`report.trials_parquet`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from facet_probe.core.console import full_errors
from facet_probe.core.errors import RunIncomplete
from facet_probe.core.memory import release
from facet_probe.datasets.screen_rates import screened_rates
from facet_probe.judge.run import JudgeTables, judge_tables_of, write_judge_tables
from facet_probe.judge.tables import agreement_table, gold_anchor, judge_replies, with_gold_match
from facet_probe.metrics.flips import ordering_accuracy
from facet_probe.report.completeness import Completeness
from facet_probe.report.contents import MetricRules, ReportInputs
from facet_probe.report.examples import flipped_examples, render_examples
from facet_probe.report.explorer.build import explorer_for_report
from facet_probe.report.explorer.page import PAGE, remove_chunks
from facet_probe.report.figure_process import HELPER_MIN_TRIALS, FigureDrawer, ReportFigures
from facet_probe.report.judge_join import add_semantic_flip, judged_paper_tables
from facet_probe.report.markdown import ReportPage, render_report
from facet_probe.report.provenance import render_provenance, run_provenance
from facet_probe.report.summary import same_order_control_of, summarise, with_control
from facet_probe.report.title import trials_title
from facet_probe.report.trials_parquet import write_trials_parquet
from facet_probe.runners.base import RunnerError
from facet_probe.scoring.run_trials import RunScope, read_run
from facet_probe.store.atomic import atomic_write_text, background_writes
from facet_probe.store.csv_tables import write_csv
from facet_probe.store.locking import FileLock
from facet_probe.store.run_folder import (
    FACET_MODEL_TABLE,
    GOLD_ANCHOR_TABLE,
    ITEM_CONTROL_TABLE,
    JUDGMENTS_FILE,
    MISSING_TRIALS_TABLE,
    MODEL_MAIN_TABLE,
    PANEL_TABLE,
    REPORT_FILE,
    REPORT_PAGE,
    SCREENED_RATES_TABLE,
    SUMMARY_FILE,
    TRIALS_TABLE,
    RunFolder,
)
from facet_probe.store.run_status import StatusWriter

log = logging.getLogger("facet_probe")
#: Above this many trials the report leaves the explorer page to `python -m facet_probe.explore` (at 100k trials
#: building it took 32 s of a 98 s report, benchmarks/bench_scale.py).
EXPLORER_MAX_TRIALS = 50_000


@dataclass
class ReportOutputs:
    """What a report wrote: its cell summary, item metrics and same-order control (None without repeats), the
    files it wrote, and how many expected trials it lacks."""

    summary: pd.DataFrame
    items: pd.DataFrame
    control: pd.DataFrame | None
    files: list[Path]
    missing: int = 0  # expected trials the report lacks (0 without a scope)


def write_outputs(inputs: ReportInputs, out: Path, rules: MetricRules | None = None,
                  drawer: FigureDrawer | None = None) -> ReportOutputs:
    """Write trials.parquet, item_metrics.csv, summary.csv, paper tables, control, figures, report.md and
    explorer.html of `inputs` into `out`, computed by `rules` (the defaults: `MetricRules()`).

    With a scope (the run's expected trials) the summary and the report say per cell how many trials are missing
    and which items are scored on fewer than asked. `drawer`: the caller's `FigureDrawer`, started before it read
    the trials (else one is started here, with a helper process for a large report). Every file is written
    atomically, and the folder's report is locked while it is written."""
    out.mkdir(parents=True, exist_ok=True)
    with (FileLock(out / REPORT_PAGE, wait=True), background_writes() as later,
          drawer or FigureDrawer(helper=len(inputs.trials) >= HELPER_MIN_TRIALS) as drawer):  # a helper starts now
        return _write_outputs(inputs, out, rules or MetricRules(), later, drawer)


def _write_outputs(inputs: ReportInputs, out: Path, rules: MetricRules, later: Callable[..., None],
                   drawer: FigureDrawer) -> ReportOutputs:
    files = judge_tables_beside(inputs.judged, out)
    judged = inputs.judged
    semantic = judged.semantic_flip if judged is not None else None
    trials = inputs.trials.reset_index(drop=True)
    anchor = gold_anchor(trials, semantic)  # judge-free: exact match, before the gold match
    trials = with_gold_match(trials, judged.judgments if judged is not None else None)  # the judge's gold match
    # drawn meanwhile in a large report's helper process (`report.figure_process`), else here and now; the accuracy
    # across orderings needs only the trials, so a helper draws it while the metrics are computed
    figs = drawer.draw(ReportFigures(ordering=ordering_accuracy(trials, rules.n_boot, seed=rules.seed)), out / "figures")

    metrics, summary = summarise(trials, inputs.items, rules.n_boot, rules.seed, rules.few_parsed)
    release(len(trials))  # the metrics' temporaries, before trials.parquet and the tables are written beside the trials
    control = same_order_control_of(trials, rules.n_boot, rules.seed)
    if control is not None:
        files.append(write_csv(control.items, out / ITEM_CONTROL_TABLE))
    summary = add_semantic_flip(with_control(summary, control), trials, semantic)
    gaps = Completeness.of(trials, inputs.scope)
    summary = gaps.annotate(summary)
    figs = drawer.draw(ReportFigures(summary=summary), out / "figures") + figs
    # on another core meanwhile; started after the metrics, whose copies would otherwise be held beside its table
    later(write_trials_parquet, trials, out / TRIALS_TABLE)
    files.append(out / TRIALS_TABLE)
    paper = judged_paper_tables(metrics, semantic, rules.n_boot, rules.seed)  # Table 1's flip: the judge's where judged
    release(len(trials))
    files.append(write_csv(metrics.items, out / REPORT_FILE))
    release(len(trials))  # its text (66k rows at 400k trials)
    files += [write_csv(summary, out / SUMMARY_FILE),
              write_csv(paper.facet_model, out / FACET_MODEL_TABLE),
              write_csv(paper.model_main, out / MODEL_MAIN_TABLE),
              write_csv(paper.panel, out / PANEL_TABLE)]
    if not (rates := screened_rates(summary)).empty:  # image-set cells: raw and screened side by side
        files.append(write_csv(rates, out / SCREENED_RATES_TABLE))
    files += write_or_remove(anchor, out / GOLD_ANCHOR_TABLE)  # an earlier report's, of judges no input has now
    files += write_or_remove(gaps.short_items, out / MISSING_TRIALS_TABLE)  # an earlier run's is no longer true

    page = ReportPage(inputs.title, summary, paper, figs, control=control.cells if control is not None else None,
                      notes=gaps.notes(inputs.scope, inputs.left_out),
                      agreement=agreement_table(judged.judge_agreement if judged is not None else None), anchor=anchor,
                      provenance=render_provenance(list(inputs.provenance)) if inputs.provenance else None,
                      examples=render_examples(flipped_examples(trials, metrics.items, inputs.items)),
                      replies=judge_replies(semantic))
    atomic_write_text(out / REPORT_PAGE, render_report(page, out))
    files.append(out / REPORT_PAGE)
    drawer.wait()
    files += figs
    files += write_explorer(inputs, trials, metrics.items, out)
    return ReportOutputs(summary, metrics.items, page.control, files, gaps.missing)


def judge_tables_beside(judged: JudgeTables | None, out: Path) -> list[Path]:
    """The judges' tables of the inputs, written beside the report (the explorer reads them); without any, an earlier
    report's tables are removed (judges no input has now), unless the folder holds its own judgments."""
    if judged is not None:
        return write_judge_tables(judged, out)
    if not (out / JUDGMENTS_FILE).is_file():
        for name in JudgeTables.NAMES:
            (out / f"{name}.csv").unlink(missing_ok=True)
    return []


def write_or_remove(table: pd.DataFrame | None, path: Path) -> list[Path]:
    """A table that only some reports have: written when it has rows, else an earlier report's copy removed."""
    if table is None or table.empty:
        path.unlink(missing_ok=True)
        return []
    return [write_csv(table, path)]


def write_explorer(inputs: ReportInputs, trials: pd.DataFrame, item_metrics: pd.DataFrame, out: Path) -> list[Path]:
    """explorer.html (a view: a failure to build it is logged and never costs the tables or the run's status); none
    for a paper-scale run, nor a stale page of an earlier report."""
    if len(trials) > EXPLORER_MAX_TRIALS:  # a paper-scale run: building the page would cost minutes per report
        (out / PAGE).unlink(missing_ok=True)  # never a stale page of an earlier, smaller report
        remove_chunks(out)  # nor the data files beside it
        log.warning("explorer.html not built for %d trials (over %d): build it with python -m facet_probe.explore "
                    "input=%s", len(trials), EXPLORER_MAX_TRIALS, out)
        return []
    try:
        return [explorer_for_report(out, trials, inputs.items, item_metrics, inputs.title,
                                    list(inputs.provenance))]
    except Exception as exc:  # one line (HYDRA_FULL_ERROR=1 adds the traceback): a successful run prints none
        log.warning("explorer.html not written in %s (%s: %s); the report's tables and figures are. Build the page "
                    "with python -m facet_probe.explore input=<this report's input> out=%s; if that fails too, "
                    "HYDRA_FULL_ERROR=1 shows the traceback to report", out, type(exc).__name__, exc, out,
                    exc_info=full_errors())
        if (out / PAGE).is_file():  # never a stale page of an earlier report (what stands there may be no file)
            (out / PAGE).unlink()
        remove_chunks(out)
        return []


def finish_run(folder: RunFolder, scope: RunScope, status: StatusWriter, rules: MetricRules,
               shard: str | None = None, drawer: FigureDrawer | None = None) -> ReportOutputs:
    """After a run: report on exactly this run's trials (those of this process's `shard`, `store.shard`; stored trials
    of other settings stay, unused) into the folder, or its shard's report folder; raises RunIncomplete (exit code 3)
    after writing everything when trials are missing. `drawer`: the run's `FigureDrawer`, if it started one."""
    run_dir = folder.path
    run = read_run(folder.trials_file(shard), scope=scope)  # this process's trials file, through what it planned
    trials, left_out, items = run.trials, run.left_out, run.items
    expected = len(scope.expected)
    if trials.empty:
        status.write("failed", trials=0, trials_missing=expected)
        raise RunnerError(f"no successful trial in {run_dir}: every one of the {expected} planned calls "
                          "failed; see the `error` field of the records in the trials file, fix the cause "
                          "and re-run the same command")
    out = folder.report_dir(shard)
    inputs = ReportInputs(trials, items, trials_title("run", trials, [run_dir.name]), scope, left_out,
                          (run_provenance(run_dir, trials),), judge_tables_of([run_dir], trials))
    outputs = write_outputs(inputs, out, rules, drawer)
    missing = outputs.missing
    status.write("complete" if not missing else "incomplete", trials=len(trials), trials_missing=missing,
                 hint=None if not missing else "re-run the same command to retry failed calls")
    if missing:
        raise RunIncomplete(out, f"{missing} of {expected} trials are missing (failed calls); the report in "
                                 f"{out} says which items; re-run the same command to retry them")
    return outputs
