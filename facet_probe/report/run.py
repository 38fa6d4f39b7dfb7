"""Trials -> the run folder's tables, figures and report.md (used after a run and by re-reporting).

Image-set cells are reported screened by default (items whose question refers to image positions
are dropped, see `facet_probe.datasets.screen`) with the unscreened numbers beside them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from facet_probe.control import same_order_control
from facet_probe.metrics import CELL_KEYS, compute_metrics
from facet_probe.report import figures
from facet_probe.report.markdown import render_report
from facet_probe.trial_io import load_trial_frame

#: Friendlier names in summary.csv for the metrics module's item-level names.
SUMMARY_RENAMES = {"any_flip": "flip_rate", "any_flip_lo": "flip_rate_lo", "any_flip_hi": "flip_rate_hi"}
SCREEN_EXCLUDE = "exclude"


@dataclass
class ReportOutputs:
    summary: pd.DataFrame
    items: pd.DataFrame
    control: pd.DataFrame | None
    files: list[Path]


def read_items(paths: Iterable[Path]) -> dict[str, dict]:
    """Canonical item records (as JSON dicts) by item id from the given items.jsonl files."""
    items: dict[str, dict] = {}
    for path in paths:
        if path.is_file():
            with path.open(encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        rec = json.loads(line)
                        items[rec["item_id"]] = rec
    return items


def screened_out(items: dict[str, dict]) -> set[str]:
    """Ids of items the image-set position-reference screen excludes."""
    out = set()
    for item_id, rec in items.items():
        verdict = (rec.get("metadata") or {}).get("position_screen")
        if isinstance(verdict, dict):
            verdict = verdict.get("verdict")
        if verdict == SCREEN_EXCLUDE:
            out.add(item_id)
    return out


def summarise(trials: pd.DataFrame, items: dict[str, dict], n_boot: int, seed: int):
    """Metrics on the screened trials, with unscreened columns for the cells the screen touched."""
    excluded = screened_out(items)
    screened = trials[~trials["item_id"].isin(excluded)] if excluded else trials
    metrics = compute_metrics(screened, n_boot=n_boot, seed=seed)
    summary = metrics.cells.rename(columns=SUMMARY_RENAMES)
    summary["screened_out"] = 0
    if excluded and len(screened) < len(trials):
        raw = compute_metrics(trials, n_boot=n_boot, seed=seed).cells.rename(columns=SUMMARY_RENAMES)
        touched = trials[trials["item_id"].isin(excluded)][CELL_KEYS].drop_duplicates()
        raw = raw.merge(touched, on=CELL_KEYS)
        cols = ["n_items", "flip_rate", "flip_rate_lo", "flip_rate_hi", "accuracy"]
        raw = raw[CELL_KEYS + cols].rename(columns={c: f"{c}_unscreened" for c in cols})
        summary = summary.merge(raw, on=CELL_KEYS, how="outer")  # keeps cells the screen emptied
        summary["n_items"] = summary["n_items"].fillna(0).astype(int)
        summary["screened_out"] = (summary["n_items_unscreened"] - summary["n_items"]).fillna(0).astype(int)
    return metrics, summary


def add_semantic_flip(summary: pd.DataFrame, trials: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Cell means of the LLM judge's semantic flip (per judge), when the run folder has judgments."""
    if not path.is_file():
        return summary
    judged = pd.read_csv(path)
    if judged.empty:
        return summary
    cells = trials[CELL_KEYS + ["item_id"]].drop_duplicates()
    per_cell = (judged.merge(cells, on=["model", "item_id"])
                .groupby(CELL_KEYS + ["judge"])["semantic_flip"].mean().unstack("judge"))
    per_cell.columns = [f"semantic_flip_{j}" for j in per_cell.columns]
    return summary.merge(per_cell.reset_index(), on=CELL_KEYS, how="left")


def write_outputs(trials: pd.DataFrame, out: Path, items: dict[str, dict] | None = None,
                  n_boot: int = 1000, seed: int = 42, title: str = "facet_probe run") -> ReportOutputs:
    """Write trials.parquet, item_metrics.csv, summary.csv, paper tables, control, figures, report.md."""
    out.mkdir(parents=True, exist_ok=True)
    items = items or {}
    files: list[Path] = []
    trials = trials.reset_index(drop=True)
    parquet = trials.copy()
    for col in ("usage", "provenance"):
        if col in parquet:
            parquet[col] = parquet[col].map(lambda v: json.dumps(v, sort_keys=True, default=str))
    parquet.to_parquet(out / "trials.parquet", index=False)
    files.append(out / "trials.parquet")

    metrics, summary = summarise(trials, items, n_boot, seed)
    control_cells = None
    if "repeat_idx" in trials and trials["repeat_idx"].max() > 0:
        control_items, control_cells = same_order_control(trials, n_boot=n_boot, seed=seed)
        control_items.to_csv(out / "item_control.csv", index=False)
        keep = [c for c in control_cells.columns if c not in ("n_items",)]
        summary = summary.merge(control_cells[keep], on=CELL_KEYS, how="left")
        files.append(out / "item_control.csv")
    summary = add_semantic_flip(summary, trials, out / "semantic_flip.csv")
    metrics.items.to_csv(out / "item_metrics.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    metrics.paper.facet_model.to_csv(out / "facet_model.csv", index=False)
    metrics.paper.model_main.to_csv(out / "model_main.csv", index=False)
    metrics.paper.panel.to_csv(out / "panel.csv", index=False)
    files += [out / n for n in ("item_metrics.csv", "summary.csv", "facet_model.csv", "model_main.csv",
                                "panel.csv")]

    fig_dir = out / "figures"
    figs = [figures.flip_rate_per_cell(summary, fig_dir / "flip_rate_per_cell.png"),
            figures.accuracy_vs_flip(summary, fig_dir / "accuracy_vs_flip.png"),
            figures.accuracy_per_ordering(trials, fig_dir / "accuracy_per_ordering.png")]
    files += figs
    report = out / "report.md"
    report.write_text(render_report(title, summary, metrics.paper, control_cells, figs, out))
    files.append(report)
    return ReportOutputs(summary, metrics.items, control_cells, files)


def finish_run(run_dir: Path, cfg: DictConfig, current_keys: set[str], status) -> ReportOutputs:
    """After a run: report on this run's trials (stale trials of other settings stay stored, unused)."""
    trials = load_trial_frame(run_dir)
    trials = trials[trials["trial_key"].isin(current_keys)]
    errors_left = len(current_keys) - len(trials)
    if trials.empty:
        status.write("failed", errors_left=errors_left)
        raise RuntimeError(f"no successful trials in {run_dir}; see the error fields in trials.jsonl")
    out = write_outputs(trials, run_dir, read_items([run_dir / "items.jsonl"]), n_boot=cfg.bootstrap,
                        seed=cfg.seed, title=f"facet_probe run: {run_dir.name}")
    state = "complete" if errors_left == 0 else "incomplete"
    status.write(state, trials=len(trials), errors_left=errors_left,
                 hint=None if not errors_left else "re-run the same command to retry failed calls")
    return out
