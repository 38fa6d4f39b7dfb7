"""`python -m facet_probe.odi` killed with SIGKILL at random moments of its sampling: no half-written output a
later reader could take for results (each outcome folder is whole, old or new, or absent), `odi_status.json`
says whether the run is complete, and running the same command again completes."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder
from facet_probe_dev.testing.in_process import run_argv
from facet_probe_dev.testing.kill import kill_after_line

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
SPEC = SimSpec(n_models=4, facets=("option_order",), items_per_facet=6, datasets_per_facet=2, seed=3)
OUTCOMES = ("modal", "correct")
OUTCOME_FILES = ("item_params.csv", "theta.csv", "decomposition.csv", "posterior_intervals.csv", "signed_delta.csv",
                 "diagnostics.csv", "fit_summary.json", "figures/theta.png", "figures/decomposition.png")


def odi_cmd(run: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "facet_probe.odi", f"input={run}", f"out={out}", "odi=smoke", "outcome=both"]


def kill_while_sampling(run: Path, out: Path, outcome: str, delay_s: float) -> None:
    """SIGKILL the app `delay_s` seconds after its log says it samples `outcome`."""
    kill_after_line(odi_cmd(run, out), f"/ {outcome}: ", delay_s, cwd=ROOT, env=ENV, timeout_s=600)


def rerun(run: Path, out: Path) -> None:
    done = run_argv(odi_cmd(run, out), cwd=ROOT)  # the rerun in this process: only the kills need their own
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "odi_status.json").read_text())["state"] == "complete"
    for outcome in OUTCOMES:
        assert_complete_outcome(out / outcome)
    assert visible(out) >= {"data_summary.json", "odi_config.json", "model_flip_rates.csv", "capability_flip.csv"}


def visible(folder: Path) -> set[str]:
    """Files a reader would see (hidden temp files and folders excluded)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def assert_complete_outcome(folder: Path) -> None:
    for name in OUTCOME_FILES:
        assert (folder / name).is_file(), name
    for name in OUTCOME_FILES:
        if name.endswith(".csv"):
            assert len(pd.read_csv(folder / name)) > 0, name
    assert json.loads((folder / "fit_summary.json").read_text())["draws"] > 0


def assert_whole_or_absent(out: Path) -> None:
    """After a kill: every outcome folder whole or absent, every table and JSON parses, and the status says
    `running` unless everything was written."""
    for outcome in OUTCOMES:
        if (out / outcome).exists():
            assert_complete_outcome(out / outcome)
    for name in visible(out):
        if name.endswith(".csv"):
            pd.read_csv(out / name)
        elif name.endswith(".json"):
            json.loads((out / name).read_text())
    if json.loads((out / "odi_status.json").read_text())["state"] != "running":
        assert all((out / o).is_dir() for o in OUTCOMES)


@pytest.mark.slow
def test_fits_killed_at_random_moments_leave_no_half_written_outputs_and_rerun_whole(tmp_path):
    """Two kill moments: sampling `modal` in a fresh folder, and sampling `correct` in a refit over a complete
    folder (the rerun between them shows a killed run completes and leaves no temp behind)."""
    run = write_run_folder(simulate(SPEC), tmp_path / "run")
    out = tmp_path / "odi"
    rng = random.Random(15)

    kill_while_sampling(run, out, "modal", rng.uniform(0.0, 1.5))  # the first fit of a fresh folder
    assert_whole_or_absent(out)
    assert json.loads((out / "odi_status.json").read_text())["state"] == "running"  # not taken as a result
    rerun(run, out)
    assert not [p for p in out.rglob(".*")], "a killed write's temp was left beside the outputs"

    kill_while_sampling(run, out, "correct", rng.uniform(0.0, 1.5))  # a refit, killed after `modal` was swapped in
    assert_whole_or_absent(out)
    assert all((out / o).is_dir() for o in OUTCOMES)  # the old `correct` stays, whole, until the new one is
    assert json.loads((out / "odi_status.json").read_text())["state"] == "running"  # not taken as a result
