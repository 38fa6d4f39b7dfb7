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
from facet_probe.report.provenance import read_status, run_name, run_provenance
from facet_probe.scoring.run_trials import read_run
from facet_probe.store.reading import folder_trial_files, read_items, run_inputs


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
        blob.add_run(title, trials, items, metrics_items, judge_verdicts(out / "judgments.csv"))
    if provenance:
        blob.runs = [{"name": p.get("run", title), "kind": "audit", "provenance": p} for p in provenance]
    return write_page(blob.to_json(), out)


def expand_inputs(inputs: list[Path]) -> list[Path]:
    """Run folders as given; a folder of run folders stands for the audit and attack run folders under it."""
    out: list[Path] = []
    for path in inputs:
        if path.is_file() or is_attack_run(path) or folder_trial_files(path):
            out.append(path)
            continue
        attacks = sorted(f.parent for f in path.rglob("attack_settings.json") if is_attack_run(f.parent))
        has_trials = any(True for f in path.rglob("trials*.jsonl"))
        if not attacks or has_trials:
            out.extend(run_inputs([path]))  # with no run folder under it: run_inputs says so
        out.extend(attacks)
    return out


def explorer_for_runs(inputs: list[Path], out: Path, title: str) -> Path:
    """One page over several run folders (audit or attack) or trials files."""
    out.mkdir(parents=True, exist_ok=True)
    blob = Blob(out, title)
    audits = []
    for path in expand_inputs(inputs):
        if path.is_dir() and is_attack_run(path):
            blob.add_attack(run_name(path), attack_rows(path, out), read_status(path) and run_provenance(path))
            continue
        folder = path if path.is_dir() else path.parent
        trials = with_gold_match(read_run(path).trials, folder / "judgments.csv")
        audits.append((path, folder, trials))
    runs_of = Counter(m for _, _, t in audits for m in t["model"].astype(str).unique())
    with one_hydra():
        for path, folder, trials in audits:
            name = run_name(path)
            label = {m: (m if runs_of[m] == 1 else f"{m} @ {name}") for m in trials["model"].astype(str).unique()}
            blob.add_run(name, trials, read_items([folder / "items.jsonl"]), item_metrics(trials),
                         judge_verdicts(folder / "judgments.csv"), run_provenance(folder, trials), label)
    return write_page(blob.to_json(), out)
