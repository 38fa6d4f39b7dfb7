"""A sweep's cross-model report: after `python -m facet_probe -m model=a,b,...`, one report (tables, figures,
report.md, explorer.html) at the sweep root over every job's run folder that holds trials.

The jobs come from `sweep_status.json` (written by `facet_probe.app.sweep.SweepStatus`); a model that two jobs ran
with other settings (a grid over K, say) is named `<model> [<run folder>]`, so no cell mixes settings."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from facet_probe.judge.run import JudgeTables, folder_judgments
from facet_probe.metrics.flips import INTERVAL_SEED
from facet_probe.report.contents import MetricRules, ReportInputs
from facet_probe.report.provenance import run_provenance
from facet_probe.report.run import write_outputs
from facet_probe.scoring.run_trials import read_run
from facet_probe.store.run_folder import REPORT_PAGE, RunFolder, is_run_folder, read_items

log = logging.getLogger("facet_probe")


def job_folders(sweep_dir: Path) -> list[Path]:
    """The run folders of the sweep's jobs that completed or are incomplete and hold trials."""
    try:
        status = json.loads((sweep_dir / "sweep_status.json").read_text())
    except (FileNotFoundError, ValueError):
        return []
    folders = [Path(r["run_dir"]) for r in status.get("job_records", ()) if r.get("state") in ("complete", "incomplete")]
    return [f for f in dict.fromkeys(folders) if is_run_folder(f)]


def cross_model_report(sweep_dir: Path, n_boot: int = 1000, seed: int = INTERVAL_SEED) -> Path | None:
    """Write the cross-model report at the sweep root; None when fewer than two jobs have trials."""
    folders = job_folders(sweep_dir)
    if len(folders) < 2:
        return None
    parts = [(f, read_run(f)) for f in folders]
    seen: dict[str, int] = {}
    for _, part in parts:
        for model in part.trials["model"].astype(str).unique():
            seen[model] = seen.get(model, 0) + 1
    frames, judged = [], []
    for folder, part in parts:  # each job's own report says what it lacks; this one compares what is there
        rename = {m: f"{m} [{folder.name}]" for m in seen if seen[m] > 1}
        frames.append(part.trials.assign(model=part.trials["model"].astype(str).replace(rename)))
        if (rows := folder_judgments(folder, part.trials)) is not None:  # a judged job: its judges, renamed alike
            judged.append(rows.assign(model=rows["model"].astype(str).replace(rename)))
    trials = pd.concat(frames, ignore_index=True)
    items = read_items([RunFolder(f).items_file for f in folders])
    inputs = ReportInputs(trials, items, f"facet_probe sweep: {len(folders)} runs, {trials['model'].nunique()} models",
                          left_out=sum(p.left_out for _, p in parts),
                          provenance=[run_provenance(f, p.trials) for f, p in parts],
                          judged=JudgeTables.of(pd.concat(judged, ignore_index=True)) if judged else None)
    write_outputs(inputs, sweep_dir, MetricRules(n_boot, seed))
    log.info("cross-model report of %d runs -> %s", len(folders), sweep_dir / REPORT_PAGE)
    return sweep_dir / REPORT_PAGE
