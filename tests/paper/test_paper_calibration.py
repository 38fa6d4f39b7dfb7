"""Our calibration protocol (`prompt.calibration=true`) and `table-calibration`: the instruction reaches the
system text, the stated stability is parsed and stored with each trial, and stated vs realised stability
matches the numbers computed by hand from the manifest (a reference policy that states 90 %)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from facet_probe.paper.calibration_table import realised_stability
from facet_probe.scoring.run_trials import read_run
from facet_probe.scoring.stability import STABILITY_INSTRUCTION, parse_stability
from tests.paper.test_paper_app import app


def test_a_stated_stability_is_read_from_the_reply():
    assert parse_stability("Answer: C\nStability: 80%") == 0.8
    assert parse_stability("The answer is (B).\nstability = 0.35") == 0.35
    assert parse_stability("Answer: C") is None and parse_stability("Stability: 180%") is None


def test_realised_stability_counts_the_other_orderings_with_the_same_answer():
    s = realised_stability(pd.Series(["A", "A", "B", "<parse_error>"]))
    assert s.tolist() == [1 / 3, 1 / 3, 0.0, 0.0]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cal") / "run"
    proc = app("facet_probe", "model=always_first_stating", "prompt.calibration=true", "facet=option_order",
               "dataset=synthetic_mcq", "limit=4", "progress=false", f"hydra.run.dir={folder}")
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_table_calibration_compares_stated_with_realised_stability(run, tmp_path):
    trials = read_run(run).trials
    assert (trials["stated_stability"] == 0.9).all() and trials["instruction"].str.contains("Stability: <p>%").all()
    assert all(STABILITY_INSTRUCTION in i for i in trials["instruction"])
    proc = app("facet_probe.paper", f"input={run}", f"out={tmp_path}", "target=table-calibration", "bootstrap=50")
    assert proc.returncode == 0, proc.stderr
    row = pd.read_csv(tmp_path / "table_calibration.csv").iloc[0]
    # by hand: always_first answers the option shown first, so a trial's realised stability is the share of the
    # item's other five orderings that show the same option first
    manifest = pd.read_parquet(run / "manifest.parquet")
    manifest["first"] = manifest["permutation"].map(lambda p: int(p[0]))
    per_trial = manifest.groupby("item_id")["first"].transform(lambda f: f.map(f.value_counts()) - 1) / 5
    realised = per_trial.groupby(manifest["item_id"]).mean().mean()
    assert row["n_items"] == 4 and row["stated"] == pytest.approx(0.9) and row["stated_share"] == 1.0
    assert row["realised"] == pytest.approx(realised) and row["mismatch"] == pytest.approx(0.9 - realised)
    assert row["mismatch_lo"] <= row["mismatch"] <= row["mismatch_hi"]
    # every item stated 0.9: a stated probability is not a share of events, so no Wilson interval around it
    assert row["stated_lo"] == pytest.approx(0.9) and row["stated_hi"] == pytest.approx(0.9)


def test_without_calibration_runs_the_target_says_what_to_run(tmp_path):
    folder = tmp_path / "plain"
    proc = app("facet_probe", "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=2",
               "progress=false", f"hydra.run.dir={folder}")
    assert proc.returncode == 0, proc.stderr
    assert read_run(folder).trials["stated_stability"].isna().all()
    proc = app("facet_probe.paper", f"input={folder}", f"out={tmp_path / 'out'}", "target=table-calibration")
    assert proc.returncode == 2 and "prompt.calibration=true" in proc.stderr and "Traceback" not in proc.stderr
