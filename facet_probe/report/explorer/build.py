"""Build the explorer page: from the report step's frames (one run folder), or from run folders read anew
(the explore app: several audit and attack runs on one page)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from facet_probe.config.loading import CONFIG_MODULE
from facet_probe.judge.tables import with_gold_match
from facet_probe.metrics.flips import item_metrics
from facet_probe.report.explorer.attack import attack_rows, is_attack_run
from facet_probe.report.explorer.data import Blob, judge_verdicts
from facet_probe.report.explorer.page import write_page
from facet_probe.report.provenance import run_name, run_provenance
from facet_probe.scoring.run_trials import read_run
from facet_probe.store.run_folder import JUDGMENTS_TABLE, RunFolder, folders_under, is_run_folder, run_inputs


@contextmanager
def one_hydra() -> Iterator[None]:
    """Facet configs are looked up through Hydra; one initialisation for the whole build (not one per facet)."""
    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        yield


def explorer_for_report(out: Path, trials: pd.DataFrame, items: dict[tuple[str, str], dict], metrics_items: pd.DataFrame,
                        title: str, provenance: list[dict] | None = None) -> Path:
    """`<out>/explorer.html` over the trials a report just scored (the report step's call); `provenance`: one
    `report.provenance.run_provenance` per run the trials come from."""
    blob = Blob(out, title)
    with one_hydra():
        blob.add_run(title, trials, items, metrics_items, judge_verdicts(out / JUDGMENTS_TABLE))
    if provenance:
        blob.runs = [{"name": p.get("run", title), "kind": "audit", "provenance": p} for p in provenance]
    return write_page(blob.to_json(), out)


def expand_inputs(inputs: list[Path]) -> list[Path]:
    """Files and run folders as given; a folder of run folders stands for the audit and attack run folders under it
    (`store.run_folder.folders_under`, of each kind)."""
    out: list[Path] = []
    for path in inputs:
        if path.is_file() or is_attack_run(path) or is_run_folder(path):
            out.append(path)
            continue
        attacks = folders_under(path, is_attack_run)
        audits = folders_under(path)
        out.extend(audits if audits or attacks else run_inputs([path]))  # with neither under it: run_inputs says so
        out.extend(attacks)
    return out


def explorer_for_runs(inputs: list[Path], out: Path, title: str) -> Path:
    """One page over several run folders (audit or attack) or trials files."""
    out.mkdir(parents=True, exist_ok=True)
    blob = Blob(out, title)
    audits = []
    for path in expand_inputs(inputs):
        if path.is_dir() and is_attack_run(path):
            provenance = run_provenance(path) if RunFolder(path).status_file.is_file() else None
            blob.add_attack(run_name(path), attack_rows(path, out), provenance)
            continue
        folder = path if path.is_dir() else path.parent
        run = read_run(path)
        audits.append((path, folder, run.items, with_gold_match(run.trials, folder / JUDGMENTS_TABLE)))
    runs_of = Counter(m for *_, t in audits for m in t["model"].astype(str).unique())
    with one_hydra():
        for path, folder, items, trials in audits:
            name = run_name(path)
            label = {m: (m if runs_of[m] == 1 else f"{m} @ {name}") for m in trials["model"].astype(str).unique()}
            blob.add_run(name, trials, items, item_metrics(trials), judge_verdicts(folder / JUDGMENTS_TABLE),
                         run_provenance(folder, trials), label)
    return write_page(blob.to_json(), out)
