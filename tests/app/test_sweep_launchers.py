"""Hydra launchers end to end: a 2-job multirun (one job per shard) through submitit's local executor and a
local Ray, each merged by the report app into a report equal to the single-process one; a sweep killed mid-run
(SIGKILL of the launcher and its jobs) and submitted again continues from the store; sweep_status.json
covers the launcher's jobs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from facet_probe.store.jsonl import iter_records
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("summary.csv", "facet_model.csv", "model_main.csv", "panel.csv", "item_metrics.csv")
KEYS = {"OPENAI_API_KEY": "sk-openai-test-key-0123456789"}
pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the launchers extra is not installed")


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, **KEYS, "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def app(module: str, *args: str) -> Ran:
    """An app in this process (the launchers start their job processes themselves); the kill needs a real one."""
    return run_module(module, *args, env={**KEYS, "TOKENIZERS_PARALLELISM": "false"}, cwd=ROOT, keys=True)


def audit_args(model: list[str]) -> list[str]:
    return [*model, "facet=option_order", "dataset=synthetic_mcq", "limit=6", "progress=false"]


def stored(folder: Path) -> list[dict]:
    return [t for f in sorted(folder.rglob("trials*.jsonl")) for t in iter_records(f)]


def run_folder(sweep: Path) -> Path:
    (folder,) = {p.parent for p in sweep.rglob("run_identity.json")}
    return folder


def merged_equals_single(sweep: Path, model: list[str], tmp: Path) -> None:
    """The report app merges the shards; its tables equal those of one process running everything."""
    folder = run_folder(sweep)
    merged = app("facet_probe.report", f"input='{folder}'", f"out={tmp / 'merged'}")
    assert merged.returncode == 0, merged.stderr[-3000:]
    single = app("facet_probe", f"hydra.run.dir={tmp / 'single'}", *audit_args(model))
    assert single.returncode == 0, single.stderr[-3000:]
    for table in TABLES:
        assert (tmp / "merged" / table).read_bytes() == (tmp / "single" / table).read_bytes(), table


def sweep_jobs(sweep: Path) -> list[dict]:
    """The launcher's jobs as sweep_status.json at the sweep root records them."""
    return json.loads((sweep / "sweep_status.json").read_text())["job_records"]


@pytest.mark.slow
def test_a_submitit_sweep_killed_mid_run_resumes_from_the_store_and_merges_to_the_single_report(tmp_path):
    sweep = tmp_path / "sweep"
    with FakeProviderServer(latency_s=0.15) as server:
        model = ["model=gpt_54_mini", f"model.base_url={server.url}/v1", "model.concurrency.max_in_flight=1",
                 "model.concurrency.initial=1"]
        cmd = [sys.executable, "-m", "facet_probe", "-m", "hydra/launcher=submitit_local",
               f"hydra.sweep.dir={sweep}", *audit_args(model), "store.shard=0/2,1/2"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # the launcher and its job processes: one group
        deadline = time.time() + 400
        while time.time() < deadline and len(stored(sweep)) < 6 and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "the kill must land mid-run"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = {t["trial_key"]: t for t in stored(sweep)}
        calls_before = len(server.ok_calls())
        again = app("facet_probe", *cmd[3:])  # the same sweep, submitted again
        asked = [c.texts()[-1] for c in server.ok_calls()]
        after = {t["trial_key"]: t for t in stored(sweep)}
        print(f"submitit_local: killed with {len(before)} of 36 trials stored; resubmitted: {len(after)} trials, "
              f"{len(asked)} calls for {len(set(asked))} prompts")
        assert again.returncode == 0, again.stderr[-3000:]
        assert 6 <= len(before) < 36 and len(after) == 36
        assert all(after[k] == t for k, t in before.items())  # nothing stored was lost or rewritten
        # a call is asked again only if its answer was in flight at the kill, never stored (one per job here)
        repeated = set(asked[:calls_before]) & set(asked[calls_before:])
        assert set(asked) == set(asked[:calls_before]) | set(asked[calls_before:]) and len(set(asked)) == 36
        assert len(repeated) <= 2 and len(before) + len(repeated) <= calls_before
        jobs = sweep_jobs(sweep)
        assert [j["state"] for j in jobs] == ["complete", "complete"]
        merged_equals_single(sweep, model, tmp_path)


def test_a_local_ray_sweep_of_two_shards_merges_to_the_single_report(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the launchers extra is not installed")
    sweep = tmp_path / "sweep"
    model = ["model=oracle"]
    proc = app("facet_probe", "-m", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
               "+hydra.launcher.ray.init.include_dashboard=false", f"hydra.sweep.dir={sweep}", *audit_args(model),
               "store.shard=0/2,1/2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sweep_jobs(sweep)
    assert [j["state"] for j in jobs] == ["complete", "complete"]
    assert len(stored(sweep)) == 36
    merged_equals_single(sweep, model, tmp_path)
