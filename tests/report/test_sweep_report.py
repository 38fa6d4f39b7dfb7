"""A sweep's cross-model report at its root: every job's models side by side in report.md and explorer.html;
a model two jobs ran with other settings is two rows, never one cell of mixed settings."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from facet_probe_dev.testing.in_process import run_module


@pytest.mark.slow
def test_a_sweep_gets_a_cross_model_report_at_its_root(tmp_path):
    proc = run_module("facet_probe", "-m", "model=oracle,position_biased", "limit=2,3", f"out_root={tmp_path}",
                   "progress=false", f"hydra.sweep.dir={tmp_path / 'sweep'}", "bootstrap=50")
    assert proc.returncode == 0, proc.stderr[-2000:]
    root = tmp_path / "sweep"
    assert len(json.loads((root / "sweep_status.json").read_text())["job_records"]) == 4
    summary = pd.read_csv(root / "summary.csv")
    assert sorted(summary["model"].unique()) == ["oracle [direct-k6-seed42_limit=2]", "oracle [direct-k6-seed42_limit=3]",
                                                 "position_biased [direct-k6-seed42_limit=2]",
                                                 "position_biased [direct-k6-seed42_limit=3]"]
    assert set(summary.groupby("model")["n_items"].sum()) == {12, 18}  # each cell from one job's settings
    report = (root / "report.md").read_text()
    assert report.startswith("# facet_probe sweep: 4 runs, 4 models") and "## Provenance" in report
    assert (root / "explorer.html").is_file() and (root / "figures" / "accuracy_vs_flip.png").is_file()
