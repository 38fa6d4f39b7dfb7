"""End to end through `python -m facet_probe` (in this process, the shared `run_module`; a process of its own only
to be killed): exact flip rates from reference policies, resume after SIGKILL with no lost or duplicated trials,
and no reuse across seeds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]


def audit(run_dir: Path, *overrides: str, check: bool = True) -> Ran:
    """The audit into `run_dir`, in this process; with `check`, a failure is the test's."""
    proc = run_module("facet_probe", f"hydra.run.dir={run_dir}", "progress=false", *overrides, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"audit failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def trials(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines() if line]


def expected_first_slot_flip_rate(manifest: pd.DataFrame) -> float:
    """always_first answers the option shown first, i.e. source option perm[0]: an item flips when
    its K orderings do not all put the same source option first."""
    first = manifest[manifest.repeat_idx == 0].assign(first=lambda m: m.permutation.map(lambda p: p[0]))
    return float(first.groupby("item_id")["first"].nunique().gt(1).mean())


@pytest.mark.slow
def test_always_first_flip_rate_is_the_one_the_manifest_implies(tmp_path):
    run = tmp_path / "run"
    audit(run, "model=always_first", "facet=option_order", "dataset=synthetic_mcq", "limit=30")
    manifest = pd.read_parquet(run / "manifest.parquet")
    summary = pd.read_csv(run / "summary.csv")
    (row,) = summary.to_dict("records")
    assert row["n_items"] == 30
    assert row["flip_rate"] == pytest.approx(expected_first_slot_flip_rate(manifest))
    assert row["parse_rate"] == 1.0


@pytest.mark.slow
def test_oracle_never_flips_and_is_always_right_on_the_offline_panel(tmp_path):
    run = tmp_path / "run"
    audit(run, "model=oracle", "limit=8")
    summary = pd.read_csv(run / "summary.csv")
    assert set(summary["facet"]) == {"option_order", "evidence_chunk_order", "document_rank_order",
                                     "image_set_order", "mixed_modality_order"}
    assert (summary["flip_rate"] == 0).all()
    assert (summary["accuracy"] == 1).all()
    for name in ("config.yaml", "items.jsonl", "manifest.parquet", "trials.parquet", "item_metrics.csv",
                 "run_status.json", "report.md"):
        assert (run / name).is_file(), name
    status = json.loads((run / "run_status.json").read_text())
    assert status["state"] == "complete"
    assert status["versions"]["python"]
    assert list((run / "figures").glob("*.png"))


@pytest.mark.slow
def test_a_run_killed_midway_resumes_with_every_trial_once(tmp_path):
    run = tmp_path / "run"
    args = ["model=seeded_random", "+model.latency_s=0.02", "facet=option_order", "dataset=synthetic_mcq",
            "limit=40"]
    cmd = [sys.executable, "-m", "facet_probe", f"hydra.run.dir={run}", "progress=false", *args]
    # a process of its own: SIGKILL mid-run is the contract (the resume below runs in this process)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trials_file = run / "trials.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if trials_file.exists() and len(trials_file.read_bytes().splitlines()) >= 30:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    complete_lines = trials_file.read_bytes().count(b"\n")
    assert 30 <= complete_lines < 240, "the kill must land mid-run"

    audit(run, *args)
    resumed = trials(run)
    keys = [t["trial_key"] for t in resumed]
    assert len(keys) == len(set(keys)) == 240  # 40 items x 6 orderings, none lost, none twice

    fresh = tmp_path / "fresh"
    audit(fresh, *args)
    by_key = {t["trial_key"]: t["raw_output"] for t in trials(fresh)}
    assert {t["trial_key"]: t["raw_output"] for t in resumed} == by_key  # identical trials


@pytest.mark.slow
def test_rerunning_a_finished_run_calls_nothing(tmp_path):
    run = tmp_path / "run"
    args = ["model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=5"]
    audit(run, *args)
    before = (run / "trials.jsonl").read_bytes()
    audit(run, *args)
    assert (run / "trials.jsonl").read_bytes() == before
    status = json.loads((run / "run_status.json").read_text())
    assert status["models"]["oracle"]["already_done"] == 30


@pytest.mark.slow
def test_a_changed_seed_draws_a_new_manifest_and_reuses_no_trial(tmp_path):
    """Another seed is another run: refused in the first run's folder, and in its own folder nothing of
    the first is reused (the shared call cache would serve any identical call)."""
    base = ["model=seeded_random", "facet=option_order", "dataset=synthetic_mcq", "limit=10",
            f"store.cache_dir={tmp_path / 'cache'}"]
    audit(tmp_path / "s42", *base)
    first = pd.read_parquet(tmp_path / "s42" / "manifest.parquet")
    keys_42 = {t["trial_key"] for t in trials(tmp_path / "s42")}
    refused = audit(tmp_path / "s42", *base, "seed=43", check=False)
    assert refused.returncode == 2 and "seed: 42 -> 43" in refused.stderr
    audit(tmp_path / "s43", *base, "seed=43")
    second = pd.read_parquet(tmp_path / "s43" / "manifest.parquet")
    assert first["permutation"].map(tuple).tolist() != second["permutation"].map(tuple).tolist()
    keys_43 = {t["trial_key"] for t in trials(tmp_path / "s43")}
    assert len(keys_43) == 60 and not keys_43 & keys_42
    status = json.loads((tmp_path / "s43" / "run_status.json").read_text())["models"]["seeded_random"]
    assert status["reused"] < 60  # only orderings identical under both seeds (the identity) can be served
    summary = pd.read_csv(tmp_path / "s43" / "summary.csv")
    assert summary["n_items"].tolist() == [10]


@pytest.mark.slow
def test_other_weights_at_the_same_local_path_are_audited_anew(tmp_path):
    """A retrained tiny VLM (`make tiny-vlm`) in place: its trials are called, not served from the old
    weights' stored trials; the unchanged weights are served."""
    import shutil

    from facet_probe.config.schema import asset_path
    from facet_probe_dev.testing.tiny_models import retrain_in_place

    folder = shutil.copytree(asset_path("tiny_vlm"), tmp_path / "tiny_vlm")
    run = tmp_path / "run"
    args = ["facet=option_order", "dataset=synthetic_mcq", "limit=2", "k=2", f"model.local_path={folder}"]
    audit(run, *args)
    audit(run, *args)
    status = json.loads((run / "run_status.json").read_text())["models"]["tiny_vlm"]
    assert status["already_done"] == 4 and status["called"] == 0
    first = {t["trial_key"] for t in trials(run)}
    retrain_in_place(folder)
    audit(run, *args)
    status = json.loads((run / "run_status.json").read_text())["models"]["tiny_vlm"]
    assert status["already_done"] == 0 and status["called"] == 4
    assert not ({t["trial_key"] for t in trials(run)} - first) & first and len(trials(run)) == 8


def test_a_facet_on_a_dataset_that_cannot_support_it_fails_before_any_call(tmp_path):
    proc = audit(tmp_path / "run", "model=oracle", "facet=image_set_order", "dataset=synthetic_mcq",
                 check=False)
    assert proc.returncode == 2
    assert "cannot be applied to dataset synthetic_mcq" in proc.stderr
    assert "option_order" in proc.stderr
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_unknown_model_name_lists_valid_names(tmp_path):
    proc = audit(tmp_path / "run", "model=nope", check=False)
    assert proc.returncode != 0
    assert "oracle" in proc.stderr


@pytest.mark.slow
def test_shards_run_separately_and_merge_into_the_unsharded_result(tmp_path):
    args = ["model=seeded_random", "facet=option_order", "dataset=synthetic_mcq", "limit=12"]
    sharded = tmp_path / "sharded"
    audit(sharded, *args, "store.shard=0/2")
    audit(sharded, *args, "store.shard=1/2")
    shard_files = sorted(sharded.glob("trials.shard-*.jsonl"))
    assert len(shard_files) == 2 and all(f.stat().st_size for f in shard_files)
    whole = tmp_path / "whole"
    audit(whole, *args)
    report = run_module("facet_probe.report", f"input={sharded}", cwd=ROOT)
    assert report.returncode == 0, report.stderr
    merged = {t["trial_key"]: t["raw_output"] for t in trials(sharded)}
    assert merged == {t["trial_key"]: t["raw_output"] for t in trials(whole)}
    cols = ["n_items", "flip_rate", "accuracy"]
    assert pd.read_csv(sharded / "summary.csv")[cols].equals(pd.read_csv(whole / "summary.csv")[cols])


@pytest.mark.slow
def test_multirun_sweeps_models_into_separate_run_folders(tmp_path):
    proc = run_module("facet_probe", "-m", "model=oracle,always_first", "facet=option_order", "dataset=synthetic_mcq",
                   "limit=4", "progress=false", f"out_root={tmp_path}", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    summaries = {p.parts[-4]: pd.read_csv(p) for p in tmp_path.glob("multirun/*/*/*/summary.csv")}
    assert set(summaries) == {"oracle", "always_first"}
    assert summaries["oracle"]["accuracy"].tolist() == [1.0]


@pytest.mark.slow
def test_prepare_only_writes_items_and_manifest_and_calls_nothing(tmp_path):
    run = tmp_path / "run"
    audit(run, "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=5", "prepare_only=true")
    assert len(pd.read_parquet(run / "manifest.parquet")) == 30
    assert len((run / "items.jsonl").read_text().splitlines()) == 5
    assert not (run / "trials.jsonl").exists()
    assert json.loads((run / "run_status.json").read_text())["state"] == "prepared"


@pytest.mark.slow
def test_a_shared_cache_serves_identical_calls_of_another_run(tmp_path):
    args = ["model=seeded_random", "facet=option_order", "dataset=synthetic_mcq", "limit=5",
            f"store.cache_dir={tmp_path / 'cache'}"]
    audit(tmp_path / "first", *args)
    audit(tmp_path / "second", *args)
    counts = json.loads((tmp_path / "second" / "run_status.json").read_text())["models"]["seeded_random"]
    assert counts["called"] == 0 and counts["reused"] == 30
    first = {t["trial_key"]: t["raw_output"] for t in trials(tmp_path / "first")}
    assert {t["trial_key"]: t["raw_output"] for t in trials(tmp_path / "second")} == first


@pytest.mark.slow
def test_the_embedded_default_audits_the_committed_tiny_vlm_on_the_offline_panel(tmp_path):
    """`python -m facet_probe` with no overrides: the project's own model, the five main facets, and
    answers that parse and beat chance (the full panel's figures are in the model card and docs)."""
    run = tmp_path / "run"
    audit(run, "limit=6", "k=2")
    config = (run / "config.yaml").read_text()
    assert "name: tiny_vlm" in config and "LlavaRunner" in config
    summary = pd.read_csv(run / "summary.csv")
    assert set(summary["facet"]) == {"option_order", "evidence_chunk_order", "document_rank_order",
                                     "image_set_order", "mixed_modality_order"}
    assert len(summary) == 6 and (summary["n_items"] == 6).all()
    assert (summary["parse_rate"] > 0.95).all(), summary
    assert summary["accuracy"].mean() > 0.5, summary  # chance is at most 0.25 on every set
