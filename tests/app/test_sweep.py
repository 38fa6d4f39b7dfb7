"""Sweeps (`python -m facet_probe -m ...`): a failing job does not stop the others, the sweep root gets
`sweep_status.json` / `.md` with every job's state, and the exit code is the most serious job's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus

from facet_probe.app.boundary import RunIncomplete
from facet_probe.app.sweep import JobRecord, classify, render_table, sweep_exit_code
from facet_probe.runners.base import RunnerError
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]


def sweep(sweep_dir: Path, *overrides: str) -> Ran:
    """A sweep (`-m`) of option_order on synthetic_mcq into `sweep_dir`, with no API key, in this process."""
    return run_module("facet_probe", "-m", "facet=option_order", "dataset=synthetic_mcq", "progress=false",
                   f"hydra.sweep.dir={sweep_dir}", *overrides, cwd=ROOT)


def records(sweep_dir: Path) -> list[dict]:
    return json.loads((sweep_dir / "sweep_status.json").read_text())["job_records"]


@pytest.mark.slow
def test_a_job_without_its_key_does_not_stop_the_sweep_and_the_root_lists_every_job(tmp_path):
    proc = sweep(tmp_path, "model=oracle,gpt_54_mini,always_first", "limit=3")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out  # the most serious job: a user error
    jobs = records(tmp_path)
    assert [j["state"] for j in jobs] == ["complete", "user error", "complete"], out
    assert [next(o for o in j["overrides"] if o.startswith("model=")) for j in jobs] == [
        "model=oracle", "model=gpt_54_mini", "model=always_first"]
    assert "no API key" in jobs[1]["error"] and "OPENAI_API_KEY" in jobs[1]["error"]
    for job in (jobs[0], jobs[2]):
        assert job["run_state"] == "complete" and job["trials"]["trials"] == 18 and job["exit_code"] == 0
        assert (Path(job["run_dir"]) / "report.md").exists()
    table = (tmp_path / "sweep_status.md").read_text()
    assert "3 jobs: 2 complete, 1 user error; exit code 2" in table
    assert all(f"| {n} | {s} |" in table for n, s in enumerate(["complete", "user error", "complete"]))
    assert "Traceback" not in out  # a user error is one line, in the sweep as in a single run


@pytest.mark.slow
def test_a_job_with_missing_trials_is_incomplete_and_the_sweep_exits_3(tmp_path):
    with FakeProviderServer(served_models=("served-model",), script=["bad_request"]) as server:
        proc = sweep(tmp_path, "model=openai_compat", "model.model_id=served-model", "limit=2",
                     f"model.base_url={server.url}/v1", "seed=42,7", "model.concurrency.initial=1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    jobs = records(tmp_path)
    assert [j["state"] for j in jobs] == ["incomplete", "complete"], out
    assert jobs[0]["trials"]["missing"] == 1 and jobs[0]["trials"]["trials"] == 11
    assert jobs[0]["trials"]["planned"] == jobs[0]["trials"]["called"] == 12
    assert jobs[1]["trials"]["missing"] == 0 and jobs[1]["trials"]["trials"] == 12


def job_return(status: JobStatus, value: object) -> JobReturn:
    ret = JobReturn(overrides=["model=x"], status=status)
    ret.return_value = value
    return ret


def test_classify_tells_incomplete_user_error_and_crash_apart():
    assert classify(job_return(JobStatus.COMPLETED, None)) == ("complete", None)
    assert classify(job_return(JobStatus.FAILED, RunIncomplete(Path("r"), "2 trials missing"))) == (
        "incomplete", "2 trials missing")
    assert classify(job_return(JobStatus.FAILED, RunnerError("no API key"))) == ("user error", "no API key")
    assert classify(job_return(JobStatus.FAILED, KeyError("boom"))) == ("crashed", "KeyError: 'boom'")


def test_the_sweep_exit_code_is_the_most_serious_jobs():
    def rec(state: str) -> JobRecord:
        return JobRecord(num=0, overrides=[], run_dir="r", state=state, exit_code=0)

    assert sweep_exit_code([rec("complete"), rec("complete")]) == 0
    assert sweep_exit_code([rec("incomplete"), rec("complete")]) == 3
    assert sweep_exit_code([rec("incomplete"), rec("user error")]) == 2
    assert sweep_exit_code([rec("user error"), rec("crashed"), rec("incomplete")]) == 1
    assert "| 0 | crashed |" in render_table([rec("crashed")])
