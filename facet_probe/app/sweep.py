"""Sweeps (`-m`): a failing job does not stop the others, and the sweep root says how every job ended.

`SweepStatus` is a Hydra callback (`hydra.callbacks` in the app configs). After each job it classifies the
outcome (complete, incomplete, user error, crashed: the app's exit codes 0, 3, 2, 1), records it under
`<sweep dir>/.sweep_jobs/` (a new sweep removes the earlier sweep's records there, and nothing else) and
rewrites `sweep_status.json` and `sweep_status.md` at the sweep root, with
each job's overrides, run folder, error line and trial counts (from its `run_status.json`). A failed job
is marked done for Hydra so the launcher goes on; when the sweep ends the table is printed and the
process exits with the most serious code among the jobs (1 before 2 before 3; 0 when all completed).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from facet_probe.app.boundary import USER_ERRORS
from facet_probe.core.errors import (
    EXIT_INCOMPLETE,
    EXIT_USER_ERROR,
    ConfigError,
    RunFolderError,
    RunIncomplete,
)
from facet_probe.core.redact import redact_text
from facet_probe.core.untrusted import markdown_cell
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.out_folder import check
from facet_probe.store.run_folder import RunFolder, RunStatus

log = logging.getLogger("facet_probe")

EXIT_CRASH = 1
#: state -> exit code, in the order of seriousness used for the sweep's own exit code.
STATES = {"crashed": EXIT_CRASH, "user error": EXIT_USER_ERROR, "incomplete": EXIT_INCOMPLETE, "complete": 0}
JOBS_DIR = ".sweep_jobs"
#: The app whose sweeps get a cross-model report at their root (`report.sweep_report`), and what marks a root as
#: a sweep's (Hydra's multirun.yaml, our status): the report is written into no other filled folder.
REPORTED_APP = "audit"
SWEEP_MARKERS = ("sweep_status.json", "multirun.yaml")


@dataclass
class JobRecord:
    """How one job of a sweep ended (one row of `sweep_status.json`)."""

    num: int
    overrides: list[str]
    run_dir: str
    state: str
    exit_code: int
    error: str | None = None
    seconds: float | None = None
    run_state: str | None = None  # the state its run_status.json records, if it wrote one
    trials: dict[str, int] = field(default_factory=dict)


def classify(job_return: JobReturn) -> tuple[str, str | None]:
    """(state, error line) of a finished job, from its status and exception."""
    if job_return.status == JobStatus.COMPLETED:
        return "complete", None
    exc = job_return._return_value
    if isinstance(exc, RunIncomplete):
        return "incomplete", str(exc)
    if isinstance(exc, USER_ERRORS):
        return "user error", str(exc)
    return "crashed", f"{type(exc).__name__}: {exc}"


def trial_counts(status: RunStatus) -> dict[str, int]:
    """Planned, called, stored and missing trials of a run, from its run_status.json (summed over models)."""
    counts = {"planned": sum(m.planned for m in status.models.values()),
              "called": sum(m.called for m in status.models.values()),
              "errors": sum(m.errors for m in status.models.values())}
    if status.trials is not None:
        counts["trials"] = status.trials
    missing = status.trials_missing if status.trials_missing is not None else status.errors_left  # older runs
    if missing is not None:
        counts["missing"] = missing
    return counts


def job_record(config: DictConfig, job_return: JobReturn, seconds: float | None) -> JobRecord:
    """The record of one finished job; a completed job whose run_status.json says incomplete is incomplete. A job
    whose run_status.json is damaged has no counts, and the damage is its error line."""
    run_dir = Path(config.hydra.runtime.output_dir)
    state, error = classify(job_return)
    try:
        status = RunFolder(run_dir).status()
    except RunFolderError as exc:
        status, error = RunStatus(), error or str(exc)
    if state == "complete" and status.state == "incomplete":
        state = "incomplete"
    return JobRecord(num=int(config.hydra.job.num), overrides=[redact_text(o) for o in job_return.overrides or []],
                     run_dir=str(run_dir), state=state, exit_code=STATES[state],
                     error=redact_text(error.splitlines()[0]) if error else None,
                     seconds=None if seconds is None else round(seconds, 2), run_state=status.state,
                     trials=trial_counts(status))


def sweep_exit_code(records: list[JobRecord]) -> int:
    """0 when every job completed, else the most serious job's code (crash 1, user error 2, incomplete 3)."""
    for state, code in STATES.items():
        if any(r.state == state for r in records):
            return code
    return 0


def read_job_record(path: Path) -> JobRecord | None:
    """The record in `path` if it is one this callback wrote (a `job-<n>.json` holding a JobRecord), else None."""
    try:
        record = JobRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return record if path.name == f"job-{record.num}.json" else None


def stored_records(sweep_dir: Path) -> dict[Path, JobRecord]:
    """The job records under `<sweep_dir>/.sweep_jobs/` by file (a file there that is not one is left out)."""
    paths = sorted((sweep_dir / JOBS_DIR).glob("job-*.json"))
    return {p: r for p in paths if (r := read_job_record(p)) is not None}


def load_records(sweep_dir: Path) -> list[JobRecord]:
    return sorted(stored_records(sweep_dir).values(), key=lambda r: r.num)


def render_table(records: list[JobRecord]) -> str:
    """A Markdown table of the jobs: number, state, overrides, trials, error, run folder (the user's text shown as
    written: `core.untrusted`)."""
    lines = ["| # | state | overrides | trials (stored / missing) | error | run folder |",
             "|---|---|---|---|---|---|"]
    for r in records:
        trials = f"{r.trials['trials']} / {r.trials.get('missing', 0)}" if "trials" in r.trials else "-"
        overrides, error, folder = (markdown_cell(v) for v in (" ".join(r.overrides), r.error or "", r.run_dir))
        lines.append(f"| {r.num} | {r.state} | {overrides} | {trials} | {error} | {folder} |")
    return "\n".join(lines) + "\n"


def write_summary(sweep_dir: Path) -> tuple[list[JobRecord], int]:
    """Rewrite sweep_status.json and sweep_status.md from the job records; return them and the exit code."""
    records = load_records(sweep_dir)
    code = sweep_exit_code(records)
    counts = {s: sum(r.state == s for r in records) for s in reversed(STATES)}  # complete first
    summary = {"jobs": len(records), "exit_code": code, "states": counts, "job_records": [asdict(r) for r in records]}
    atomic_write_text(sweep_dir / "sweep_status.json", json.dumps(summary, indent=2))
    head = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    atomic_write_text(sweep_dir / "sweep_status.md",
                      f"# Sweep status\n\n{len(records)} jobs: {head}; exit code {code}\n\n" + render_table(records))
    return records, code


class SweepStatus(Callback):
    """Hydra callback: failed jobs do not stop a sweep; the sweep root gets every job's status."""

    def __init__(self) -> None:
        self._started: float | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if config.hydra.job.name == REPORTED_APP:  # its report goes to the root: a new folder or a sweep's only
            try:
                check(sweep_dir, "the sweep's cross-model report", SWEEP_MARKERS, setting="hydra.sweep.dir")
            except ConfigError as exc:  # raised, it would be Hydra's warning and the sweep would go on
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(EXIT_USER_ERROR)
        for path in stored_records(sweep_dir):  # an earlier sweep's records, and no other file
            path.unlink()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._started = time.perf_counter()

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        seconds = None if self._started is None else time.perf_counter() - self._started
        record = job_record(config, job_return, seconds)
        if record.state == "crashed":  # a bug: show its traceback (user errors were already shown in one line)
            exc = job_return._return_value
            log.error("job #%d crashed", record.num, exc_info=(type(exc), exc, exc.__traceback__))
        if job_return.status == JobStatus.FAILED:  # recorded here; Hydra would otherwise stop the sweep
            job_return.status, job_return.return_value = JobStatus.COMPLETED, record
        sweep_dir = Path(str(config.hydra.sweep.dir))
        atomic_write_text(sweep_dir / JOBS_DIR / f"job-{record.num}.json", json.dumps(asdict(record), indent=2))
        write_summary(sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        records, code = write_summary(sweep_dir)
        if config.hydra.job.name == REPORTED_APP:  # the jobs' run folders side by side (report.sweep_report)
            from facet_probe.metrics.flips import INTERVAL_SEED
            from facet_probe.report.sweep_report import cross_model_report

            try:
                cross_model_report(sweep_dir, int(config.get("bootstrap", 1000)),
                                   int(config.get("bootstrap_seed", INTERVAL_SEED)))
            except Exception:  # a view over the jobs: its failure never hides how the jobs ended
                log.exception("the sweep's cross-model report was not written")
        print(f"\nsweep: {len(records)} jobs -> {sweep_dir / 'sweep_status.md'}")
        for r in records:
            print(f"  #{r.num} {r.state:<10} {' '.join(r.overrides)}" + (f"  ({r.error})" if r.error else ""))
        if code:
            print(f"sweep: exit code {code} ({[s for s, c in STATES.items() if c == code][0]})", file=sys.stderr)
            sys.exit(code)
