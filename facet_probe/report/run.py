"""Trials -> the run folder's tables, figures, report.md and explorer.html (used after a run and by
re-reporting; see docs/report.md).

Image-set cells are reported screened by default (items whose question refers to image positions
are dropped, see `facet_probe.datasets.screen`) with the unscreened numbers beside them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from omegaconf import DictConfig

from facet_probe.core.console import full_errors
from facet_probe.core.errors import RunIncomplete
from facet_probe.core.memory import release
from facet_probe.core.untrusted import markdown_text
from facet_probe.datasets.screen_rates import screened_rates, variant_column
from facet_probe.judge.cache import JUDGMENTS_FILE
from facet_probe.judge.run import JudgeTables, judge_tables_of, write_judge_tables
from facet_probe.judge.tables import (
    Table,
    agreement_table,
    flip_sources,
    gold_anchor,
    item_flips,
    judge_replies,
    judged_cells,
    semantic_cases,
    with_gold_match,
)
from facet_probe.metrics.flips import (
    CELL_KEYS,
    INTERVAL_SEED,
    FewParsed,
    compute_metrics,
    group_intervals,
    ordering_accuracy,
    paper_tables,
)
from facet_probe.report.examples import flipped_examples, render_examples
from facet_probe.report.explorer.build import explorer_for_report
from facet_probe.report.explorer.page import remove_chunks
from facet_probe.report.figure_process import (
    HELPER_MIN_TRIALS,
    FigureDrawer,
    ReportFigures,
)
from facet_probe.report.markdown import render_report
from facet_probe.report.provenance import render_provenance, run_provenance
from facet_probe.report.title import trials_title
from facet_probe.runners.base import RunnerError
from facet_probe.scoring.rescore import rescore
from facet_probe.scoring.run_trials import RunScope, completeness, select_run_trials
from facet_probe.store.atomic import atomic_path, atomic_write_text, background_writes
from facet_probe.store.columnar import distinct_objects
from facet_probe.store.csv_tables import write_csv
from facet_probe.store.locking import FileLock
from facet_probe.store.reading import ItemKey, item_keys_in, load_trial_frame, read_items
from facet_probe.store.trial_store import shard_file

#: Friendlier names in summary.csv for the metrics module's item-level names.
SUMMARY_RENAMES = {"any_flip": "flip_rate", "any_flip_lo": "flip_rate_lo", "any_flip_hi": "flip_rate_hi"}
SCREEN_EXCLUDE = "exclude"
#: Every report writes it: it marks a folder as a report's (the report app writes into no other filled folder)
REPORT_FILE = "item_metrics.csv"
log = logging.getLogger("facet_probe")
#: Above this many trials the report leaves the explorer page to `python -m facet_probe.explore` (at 100k trials
#: building it took 32 s of a 98 s report, benchmarks/bench_scale.py).
EXPLORER_MAX_TRIALS = 50_000


@dataclass
class ReportOutputs:
    summary: pd.DataFrame
    items: pd.DataFrame
    control: pd.DataFrame | None
    files: list[Path]
    missing: int = 0  # expected trials the report lacks (0 without a scope)


def screened_out(items: dict[ItemKey, dict]) -> set[ItemKey]:
    """Keys of the items the image-set position-reference screen excludes."""
    out = set()
    for key, rec in items.items():
        verdict = (rec.get("metadata") or {}).get("position_screen")
        if isinstance(verdict, dict):
            verdict = verdict.get("verdict")
        if verdict == SCREEN_EXCLUDE:
            out.add(key)
    return out


def screen_trials(trials: pd.DataFrame, items: dict[ItemKey, dict]) -> tuple[pd.DataFrame, pd.Series]:
    """The trials the image-set screen keeps (its items' `position_screen` verdicts), and which it drops."""
    excluded = screened_out(items)
    dropped = item_keys_in(trials, excluded) if excluded else pd.Series(False, index=trials.index)
    return (trials[~dropped] if excluded else trials), dropped


def summarise(trials: pd.DataFrame, items: dict[ItemKey, dict], n_boot: int, seed: int,
              few_parsed: FewParsed = FewParsed.EXCLUDE):
    """Metrics on the screened trials, with unscreened columns for the cells the screen touched."""
    screened, dropped = screen_trials(trials, items)
    metrics = compute_metrics(screened, n_boot=n_boot, seed=seed, few_parsed=few_parsed)
    summary = metrics.cells.rename(columns=SUMMARY_RENAMES)
    summary["screened_out"] = 0
    if len(screened) < len(trials):
        raw = compute_metrics(trials, n_boot=n_boot, seed=seed, few_parsed=few_parsed).cells.rename(
            columns=SUMMARY_RENAMES)
        touched = trials[dropped][CELL_KEYS].drop_duplicates()
        raw = raw.merge(touched, on=CELL_KEYS)
        cols = ["n_items", "flip_rate", "flip_rate_lo", "flip_rate_hi", "accuracy"]
        raw = raw[CELL_KEYS + cols].rename(columns={c: variant_column(c, "unscreened") for c in cols})
        summary = summary.merge(raw, on=CELL_KEYS, how="outer")  # keeps cells the screen emptied
        summary["n_items"] = summary["n_items"].fillna(0).astype(int)
        summary["screened_out"] = (summary["n_items_unscreened"] - summary["n_items"]).fillna(0).astype(int)
    return metrics, summary


def add_semantic_flip(summary: pd.DataFrame, trials: pd.DataFrame, semantic: Table) -> pd.DataFrame:
    """Cell means of the LLM judge's semantic flip per judge, when the trials were judged (`semantic`: the
    judge's semantic_flip table or its CSV): `sem_flip_set_<judge>` (FACET-PROBE v0.0.1's (B + C) / n over set
    verdicts) and, from per-answer verdicts, `sem_flip_answers_<judge>` (share of answers judged B or C);
    repeat 0's cases, as for flips (`judge.tables.semantic_cases`)."""
    mine = semantic_cases(semantic, trials)
    if mine.empty:
        return summary
    out = summary
    for col in ("sem_flip_set", "sem_flip_answers"):
        per_cell = mine.groupby(CELL_KEYS + ["judge"])[col].mean().unstack("judge").dropna(axis=1, how="all")
        if per_cell.empty:
            continue
        per_cell.columns = [f"{col}_{j}" for j in per_cell.columns]
        out = out.merge(per_cell.reset_index(), on=CELL_KEYS, how="left")
    return out


def write_outputs(trials: pd.DataFrame, out: Path, items: dict[ItemKey, dict] | None = None,
                  n_boot: int = 1000, seed: int = INTERVAL_SEED, title: str = "facet_probe run",
                  scope: RunScope | None = None, left_out: int = 0,
                  few_parsed: FewParsed = FewParsed.EXCLUDE, provenance: list[dict] | None = None,
                  judged: JudgeTables | None = None, drawer: FigureDrawer | None = None) -> ReportOutputs:
    """Write trials.parquet, item_metrics.csv, summary.csv, paper tables, control, figures, report.md.

    With a `scope` (the run's expected trials) the summary and the report say per cell how many trials
    are missing and which items are scored on fewer than asked; a shard's scope is labelled as such.
    `provenance` (`report.provenance.run_provenance` per run) opens report.md and the explorer page.
    `judged`: the judges' tables of the input run folders (`judge.run.judge_tables_of`), written beside the
    report and read by its tables. `drawer`: the caller's `FigureDrawer`, started before it read the trials (else
    one is started here, with a helper process for a large report). Every file is written atomically, and the
    folder's report is locked while it is written."""
    out.mkdir(parents=True, exist_ok=True)
    with (FileLock(out / "report.md", wait=True), background_writes() as later,
          drawer or FigureDrawer(helper=len(trials) >= HELPER_MIN_TRIALS) as drawer):  # a helper starts now, if any
        return _write_outputs(trials, out, items or {}, n_boot, seed, title, scope, left_out, few_parsed,
                              provenance or [], judged, later, drawer)


def with_facet_model_ci(facet_model: pd.DataFrame, flips: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """facet_model.csv with CIs of its flip rate and accuracy (`metrics.flips.group_intervals` over `item_flips`:
    a judged item's flip is the judge's sem-flip), the intervals Table 1 prints for the same cells."""
    ci = group_intervals(flips, ["model", "facet"], metrics=("flip", "accuracy"), n_boot=n_boot, seed=seed)
    return facet_model.merge(ci.rename(columns={"flip_lo": "any_flip_lo", "flip_hi": "any_flip_hi"}),
                             on=["model", "facet"], how="left")


def _write_outputs(trials, out, items, n_boot, seed, title, scope, left_out, few_parsed,
                   provenance, judged: JudgeTables | None, later: Callable[..., None],
                   drawer: FigureDrawer) -> ReportOutputs:
    files: list[Path] = []
    trials = trials.reset_index(drop=True)
    if judged is not None:  # the judges' tables of the inputs, beside the report (the explorer reads them)
        files += write_judge_tables(judged, out)
    elif not (out / JUDGMENTS_FILE).is_file():  # an earlier report's tables of judges no input has now
        for name in JudgeTables.NAMES:
            (out / f"{name}.csv").unlink(missing_ok=True)
    semantic = judged.semantic_flip if judged is not None else None
    anchor = gold_anchor(trials, semantic)  # judge-free: exact match, before the gold match
    trials = with_gold_match(trials, judged.judgments if judged is not None else None)  # the judge's gold match
    # drawn meanwhile in a large report's helper process (`report.figure_process`), else here and now; the accuracy
    # across orderings needs only the trials, so a helper draws it while the metrics are computed
    figs = drawer.draw(ReportFigures(ordering=ordering_accuracy(trials, n_boot, seed=seed)), out / "figures")

    metrics, summary = summarise(trials, items, n_boot, seed, few_parsed)
    release(len(trials))  # the metrics' temporaries, before trials.parquet and the tables are written beside the trials
    control_cells = None
    if "repeat_idx" in trials and trials["repeat_idx"].max() > 0:
        # imported here: it imports scipy.stats (0.5 s), which only runs with repeats need
        from facet_probe.metrics.same_order import same_order_control

        control_items, control_cells = same_order_control(trials, n_boot=n_boot, seed=seed)
        files.append(write_csv(control_items, out / "item_control.csv"))
        keep = [c for c in control_cells.columns if c not in ("n_items",)]
        summary = summary.merge(control_cells[keep], on=CELL_KEYS, how="left")
    summary = add_semantic_flip(summary, trials, semantic)
    gaps = Completeness.of(trials, scope)
    summary = gaps.annotate(summary)
    figs = drawer.draw(ReportFigures(summary=summary), out / "figures") + figs
    # on another core meanwhile; started after the metrics, whose copies would otherwise be held beside its table
    later(write_trials_parquet, trials, out / "trials.parquet")
    files.append(out / "trials.parquet")
    flips = item_flips(metrics.items, semantic)  # Table 1's item flip: the judge's sem-flip where judged
    cells = judged_cells(metrics.cells, flips)
    paper = paper_tables(cells)
    paper = replace(paper, facet_model=with_facet_model_ci(
        paper.facet_model.merge(flip_sources(cells), on=["model", "facet"]), flips, n_boot, seed))
    release(len(trials))
    files.append(write_csv(metrics.items, out / REPORT_FILE))
    release(len(trials))  # its text (66k rows at 400k trials)
    files += [write_csv(summary, out / "summary.csv"),
              write_csv(paper.facet_model, out / "facet_model.csv"),
              write_csv(paper.model_main, out / "model_main.csv"),
              write_csv(paper.panel, out / "panel.csv")]
    if not (rates := screened_rates(summary)).empty:  # image-set cells: raw and screened side by side
        files.append(write_csv(rates, out / "screened_rates.csv"))
    if anchor is not None:
        files.append(write_csv(anchor, out / "gold_anchor.csv"))
    else:
        (out / "gold_anchor.csv").unlink(missing_ok=True)  # an earlier report's, of judges no input has now
    if gaps.short_items is not None and not gaps.short_items.empty:
        files.append(write_csv(gaps.short_items, out / "missing_trials.csv"))
    else:
        (out / "missing_trials.csv").unlink(missing_ok=True)  # an earlier session's list is no longer true

    notes = gaps.notes(scope, left_out)
    report = out / "report.md"
    examples = render_examples(flipped_examples(trials, metrics.items, items))
    atomic_write_text(report, render_report(title, summary, paper, control_cells, figs, out, notes,
                                              agreement_table(judged.judge_agreement if judged is not None else None), anchor,
                                              render_provenance(provenance) if provenance else None, examples,
                                              judge_replies(semantic)))
    files.append(report)
    drawer.wait()
    files += figs
    if len(trials) > EXPLORER_MAX_TRIALS:  # a paper-scale run: building the page would cost minutes per report
        (out / "explorer.html").unlink(missing_ok=True)  # never a stale page of an earlier, smaller report
        remove_chunks(out)  # nor the data files beside it
        log.warning("explorer.html not built for %d trials (over %d): build it with python -m facet_probe.explore "
                    "input=%s", len(trials), EXPLORER_MAX_TRIALS, out)
        return ReportOutputs(summary, metrics.items, control_cells, files, gaps.missing)
    try:  # the page is a view: a failure to build it is logged and never costs the tables or the run's status
        files.append(explorer_for_report(out, trials, items, metrics.items, title, provenance))
    except Exception as exc:  # one line (HYDRA_FULL_ERROR=1 adds the traceback): a successful run prints none
        log.warning("explorer.html not written in %s (%s: %s); the report's tables and figures are. Build the page "
                    "with python -m facet_probe.explore input=<this report's input> out=%s; if that fails too, "
                    "HYDRA_FULL_ERROR=1 shows the traceback to report", out, type(exc).__name__, exc, out,
                    exc_info=full_errors())
        if (out / "explorer.html").is_file():
            (out / "explorer.html").unlink()  # never a stale page of an earlier report
        remove_chunks(out)
    return ReportOutputs(summary, metrics.items, control_cells, files, gaps.missing)


@dataclass
class Completeness:
    """What a report lacks against its scope: per-cell counts and the items scored on fewer trials."""

    cells: pd.DataFrame | None = None
    short_items: pd.DataFrame | None = None

    @classmethod
    def of(cls, trials: pd.DataFrame, scope: RunScope | None) -> Completeness:
        if scope is None or scope.expected.empty:
            return cls()
        cells, short = completeness(trials, scope)
        return cls(cells, short)

    @property
    def missing(self) -> int:
        return 0 if self.cells is None else int(self.cells["n_trials_missing"].sum())

    def annotate(self, summary: pd.DataFrame) -> pd.DataFrame:
        """summary.csv with n_trials_expected / n_trials_missing / n_items_short per cell (a cell with no
        trial at all still gets its line)."""
        if self.cells is None:
            return summary
        merged = summary.merge(self.cells, on=CELL_KEYS, how="outer")
        merged["n_items"] = merged["n_items"].fillna(0).astype(int)
        return merged

    def notes(self, scope: RunScope | None, left_out: int) -> list[str]:
        """Paragraphs for the top of report.md: the shard, what is missing, what was left out (names and ids shown
        as written, `core.untrusted`)."""
        notes = []
        if scope is not None and scope.shard:
            items = scope.expected["item_id"].nunique()
            notes.append(f"**Shard {scope.shard} only.** This report covers {items} of the run's "
                         f"{scope.run_items} items. The whole run's report: `python -m facet_probe.report "
                         "input=<run folder>` once every shard is done (it merges the shard files).")
        if self.missing:
            cells = self.cells[self.cells["n_trials_missing"] > 0]
            lines = [f"- {markdown_text(f'{r.model} / {r.facet} / {r.dataset}')}: {r.n_trials_missing} of "
                     f"{r.n_trials_expected} trials missing; {_count(r.n_items_short, 'item')} scored on fewer "
                     "orderings than asked"
                     for r in cells.itertuples()]
            ids = self.short_items["item_id"].astype(str).unique()
            shown = ", ".join(map(markdown_text, ids[:20])) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
            notes.append(f"**Incomplete: {_count(self.missing, 'trial')} missing** (calls that failed for "
                         "good, or were never made). Re-run the same command to retry them; "
                         "`missing_trials.csv` lists the items.\n\n" + "\n".join(lines)
                         + f"\n\nItems scored on fewer orderings: {shown}.")
        for name, short in (scope.shortfalls if scope is not None else {}).items():
            notes.append(f"**Dataset {markdown_text(name)}: {short['found']} of the {short['asked']} items asked** "
                         "pass its filter (audited with `dataset.allow_partial=true`); its cells cover those only.")
        if left_out:
            notes.append(f"{left_out} stored trials of other settings (another K, seed, model "
                         "fingerprint or manifest) are in the trials file and were left out of this report.")
        return notes


#: The trials' columns of nested records, written to trials.parquet as JSON text.
JSON_COLUMNS = ("usage", "provenance")


#: Rows of trials.parquet converted and written at a time (a row group each): its Arrow columns are held for one
#: slice only (a 400k-trial report's provenance text alone was 63 MB whole).
PARQUET_SLICE_ROWS = 65_536


def write_trials_parquet(trials: pd.DataFrame, path: Path) -> Path:
    """Write the trials as one Parquet file, atomically, a slice of rows at a time: `JSON_COLUMNS` as JSON text
    (`json_cells`), the other columns of Python objects (lists, None) as Arrow makes them (`objects_array`). Runs on
    another thread: pandas copies on write, so the caller's later edits of its frame never reach this one."""
    converted = {name: json_cells(trials[name]) if name in JSON_COLUMNS else objects_array(trials[name])
                 for name in trials.columns if trials[name].dtype == object}
    plain = trials.drop(columns=list(converted))
    with atomic_path(path) as tmp:
        writer = None
        for start in range(0, max(len(trials), 1), PARQUET_SLICE_ROWS):
            table = pa.Table.from_pandas(plain.iloc[start:start + PARQUET_SLICE_ROWS], preserve_index=False)
            for position, name in enumerate(trials.columns):  # in the trials' order
                if name in converted:
                    table = table.add_column(position, name, converted[name].slice(start, PARQUET_SLICE_ROWS))
            writer = writer or pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table)
        writer.close()
    return path


def objects_array(values: pd.Series) -> DistinctValues:
    """A column of Python objects as `pa.Array.from_pandas` makes it (NaN and None are null), each distinct object
    converted once: a trial's permutation and component ids are shared by the rows read from a columnar copy, so a
    400k-trial column costs a few thousand conversions (0.06 s against 0.13 s, holding the GIL either way)."""
    codes, distinct = distinct_objects(values.tolist())
    return DistinctValues(pa.array(distinct, from_pandas=True), row_codes(codes))


def row_codes(codes: np.ndarray) -> pa.Array:
    """Each row's code as int32 (the codes `distinct_objects` gives are 8 bytes a row: 3.2 MB a column at 400k
    trials, held by the thread writing trials.parquet for each of its ten object columns)."""
    return pa.array(codes.astype(np.int32))


@dataclass(frozen=True)
class DistinctValues:
    """A column as its distinct values and each row's code: its rows are made a slice at a time."""

    values: pa.Array
    codes: pa.Array

    def slice(self, start: int, rows: int) -> pa.Array:
        return self.values.take(self.codes.slice(start, rows))

    def to_array(self) -> pa.Array:
        return self.values.take(self.codes)


def json_cells(values: pd.Series) -> DistinctValues:
    """Each cell as JSON text (keys sorted), each distinct object encoded once: cells read from a trials file's
    columnar copy share one object per distinct value (a run's provenance repeats across its trials)."""
    codes, distinct = distinct_objects(values.tolist())
    texts = pa.array([json.dumps(v, sort_keys=True, default=str) for v in distinct], type=pa.string())
    return DistinctValues(texts, row_codes(codes))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def finish_run(run_dir: Path, cfg: DictConfig, scope: RunScope, status, out: Path | None = None,
               drawer: FigureDrawer | None = None) -> ReportOutputs:
    """After a run: report on exactly this run's trials (stored trials of other settings stay, unused);
    raises RunIncomplete (exit code 3) after writing everything when trials are missing. `drawer`: the run's
    `FigureDrawer`, if it started one (`write_outputs`)."""
    stored = load_trial_frame(trial_files_of(run_dir, cfg))
    trials, left_out = select_run_trials(stored, scope) if not stored.empty else (stored, 0)  # every call failed
    items = read_items([run_dir / "items.jsonl"])
    trials = rescore(trials, items)  # trials an older scorer scored, read again from what was said
    expected = len(scope.expected)
    if trials.empty:
        status.write("failed", trials=0, trials_missing=expected)
        raise RunnerError(f"no successful trial in {run_dir}: every one of the {expected} planned calls "
                          "failed; see the `error` field of the records in the trials file, fix the cause "
                          "and re-run the same command")
    out = out or run_dir
    outputs = write_outputs(trials, out, items, n_boot=cfg.bootstrap,
                            seed=cfg.bootstrap_seed, title=trials_title("run", trials, [run_dir.name]), scope=scope,
                            left_out=left_out, provenance=[run_provenance(run_dir, trials)],
                            judged=judge_tables_of([run_dir], trials), drawer=drawer)
    missing = outputs.missing
    status.write("complete" if not missing else "incomplete", trials=len(trials), trials_missing=missing,
                 hint=None if not missing else "re-run the same command to retry failed calls")
    if missing:
        raise RunIncomplete(out, f"{missing} of {expected} trials are missing (failed calls); the report in "
                                 f"{out} says which items; re-run the same command to retry them")
    return outputs


def trial_files_of(run_dir: Path, cfg: DictConfig) -> Path:
    """This process's trials file: the folder's, or its shard's."""
    return shard_file(run_dir, cfg.store.shard)
