"""`python -m facet_probe.odi` killed with SIGKILL mid-fit: no half-written output a later reader could take
for results; each outcome folder is complete (old or new) and `odi_status.json` says whether the run is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
SPEC = SimSpec(n_models=4, facets=("option_order",), items_per_facet=6, datasets_per_facet=2, seed=3)
OUTCOME_FILES = ("item_params.csv", "theta.csv", "decomposition.csv", "signed_delta.csv", "diagnostics.csv",
                 "fit_summary.json", "figures/theta.png", "figures/decomposition.png")


def odi_cmd(run: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "facet_probe.odi", f"input={run}", f"out={out}", "odi=smoke", "outcome=both"]


def kill_when_fitting(run: Path, out: Path, outcome: str) -> None:
    """Start the app and SIGKILL it while `outcome` is being fitted (once its log says it samples)."""
    proc = subprocess.Popen(odi_cmd(run, out), cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if f"/ {outcome}: " in line and "sampling with" in line:
            break
    time.sleep(0.3)  # into the fit
    assert proc.poll() is None, "the kill must land mid-run"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


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


def test_a_fit_killed_midway_leaves_no_half_written_outputs(tmp_path):
    run = write_run_folder(simulate(SPEC), tmp_path / "run")
    out = tmp_path / "odi"
    kills = 0

    kill_when_fitting(run, out, "modal")  # the first fit of a fresh folder
    kills += 1
    assert visible(out) == {"odi_status.json"}  # no table, no figure, no summary of a fit that never ended
    assert json.loads((out / "odi_status.json").read_text())["state"] == "running"

    done = subprocess.run(odi_cmd(run, out), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "odi_status.json").read_text())["state"] == "complete"
    for outcome in ("modal", "correct"):
        assert_complete_outcome(out / outcome)
    assert visible(out) >= {"data_summary.json", "odi_config.json", "model_flip_rates.csv", "capability_flip.csv"}
    before = {name: (out / "correct" / name).read_bytes() for name in OUTCOME_FILES}

    kill_when_fitting(run, out, "correct")  # a refit, killed after `modal` was swapped in, while `correct` fits
    kills += 1
    assert json.loads((out / "odi_status.json").read_text())["state"] == "running"  # not taken as a result
    assert_complete_outcome(out / "modal")  # the new fit, whole
    assert {name: (out / "correct" / name).read_bytes() for name in OUTCOME_FILES} == before  # the old, whole
    assert kills == 2
