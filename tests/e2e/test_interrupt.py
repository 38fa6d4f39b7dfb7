"""Ctrl-C in every app (issue 61, point 8): one line saying what is stored and to re-run the same command, exit code
130 (128 + SIGINT, as a shell reports it), no traceback, nothing lost. It printed a ~50-line KeyboardInterrupt
traceback and no advice. The process-level contract (a real SIGINT to a real audit) is tested once; every app is
tested in this process, a KeyboardInterrupt raised from inside its work through the same boundary
(`app.boundary.run_app`)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from facet_probe_dev.testing.in_process import run_module
from tests.e2e.test_bad_input import a_run

ROOT = Path(__file__).resolve().parents[2]
EXIT_INTERRUPTED = 130
RESUME = "re-run the same command to resume (what is stored is not made again)"
REDO = ("Ctrl-C stopped the run; its inputs are untouched and no output is left half-written; re-run the same "
        "command to make the outputs")


def stopped(*_args, **_kwargs):
    raise KeyboardInterrupt


def run_stopped(app: str, *args: str, **kwargs):
    """`run_module`, where a KeyboardInterrupt the app lets through (a traceback, in a process) fails the test
    instead of stopping the test session."""
    try:
        return run_module(app, *args, **kwargs)
    except KeyboardInterrupt:
        pytest.fail(f"{app} let Ctrl-C through as a KeyboardInterrupt (its traceback, in a process)")


def interrupted_line(stderr: str) -> str:
    """The one `interrupted:` line (the test fails on a traceback, or on more lines than one)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted: ")]
    assert len(lines) == 1, stderr
    return lines[0]


#: (app, where its work is stopped, its arguments given a finished run folder and a fresh folder, what it stores:
#: "<what> in <file>" for the apps that resume, None for those that read their inputs and write outputs whole)
APPS = [
    ("facet_probe", "facet_probe.audit.execute.run_model",
     lambda run, out: [f"hydra.run.dir={run}", "progress=false", "model=oracle", "facet=option_order",
                       "dataset=synthetic_mcq", "limit=3", "k=2"], ("trials", "trials.jsonl")),
    ("facet_probe.judge", "facet_probe.judge.__main__.judge_run_folder",
     lambda run, out: [f"input={run}", "judge=gemini_pro"], ("judgments", "judgments.jsonl")),
    ("facet_probe.attack", "facet_probe.attack.run.load_items",
     lambda run, out: [f"out_root={out}", "limit=1", "attack.steps=1"], ("samples", "results.jsonl")),
    ("facet_probe.report", "facet_probe.report.__main__.write_outputs",
     lambda run, out: [f"input={run}", f"out={out}"], None),
    ("facet_probe.paper", "facet_probe.paper.__main__.Inputs", lambda run, out: [f"input={run}", f"out={out}"], None),
    ("facet_probe.odi", "facet_probe.odi.__main__.check_extra", lambda run, out: [f"input={run}", f"out={out}"], None),
    ("facet_probe.decoder", "facet_probe.decoder.__main__.read_runs",
     lambda run, out: [f"input={run}", f"out={out}"], None),
    ("facet_probe.explore", "facet_probe.explore.__main__.explorer_for_runs",
     lambda run, out: [f"input={run}", f"out={out}"], None),
]


@pytest.mark.parametrize(("app", "work", "args", "stores"), APPS, ids=[a[0].split(".")[-1] for a in APPS])
def test_ctrl_c_in_every_app_is_one_line_and_exit_130(app, work, args, stores, tmp_path, monkeypatch):
    run = a_run(tmp_path)
    trials = (run / "trials.jsonl").read_bytes()
    monkeypatch.setattr(work, stopped)
    proc = run_stopped(app, *args(run, tmp_path / "out"), env={"GOOGLE_API_KEY": "AIza-test-key-0123456789"})
    line = interrupted_line(proc.stderr)
    assert proc.returncode == EXIT_INTERRUPTED, proc.stderr
    if stores is None:
        assert line == f"interrupted: {REDO}"
    else:
        what, name = stores
        stored = next(tmp_path.rglob(name), None)
        count = stored.read_bytes().count(b"\n") if stored is not None else 0
        assert line.startswith(f"interrupted: Ctrl-C stopped the run; {count} {what} are stored in ")
        assert line.endswith(f"{name}; {RESUME}")
    assert (run / "trials.jsonl").read_bytes() == trials  # nothing lost


def test_ctrl_c_under_the_attacks_progress_bar_starts_a_line_of_its_own(tmp_path, monkeypatch):
    """The bar was left open on Ctrl-C: the `interrupted:` line was written on the bar's own line. (No model is
    loaded: the first batch is stopped before it reaches one.)"""
    from types import SimpleNamespace

    monkeypatch.setattr("facet_probe.attack.run.load_runner", lambda node: SimpleNamespace(provenance={}))
    monkeypatch.setattr("facet_probe.attack.run.ModelOps", lambda runner, size: SimpleNamespace(batch_size=size))
    monkeypatch.setattr("facet_probe.attack.run.attack_chunk", stopped)
    proc = run_stopped("facet_probe.attack", f"out_root={tmp_path}", "limit=1", "attack.steps=1", "max_new_tokens=4",
                       "progress=true")
    assert proc.returncode == EXIT_INTERRUPTED, proc.stderr
    assert interrupted_line(proc.stderr).endswith(f"results.jsonl; {RESUME}")


def test_ctrl_c_outside_the_apps_work_is_one_line_too(monkeypatch, tmp_path):
    """Outside `run_app` (Hydra composing the config, setting up the job), `app.boundary.main_entry` says it alike."""
    monkeypatch.setattr("facet_probe.report.__main__.run_app", stopped)
    proc = run_stopped("facet_probe.report", f"input={tmp_path}")
    assert proc.returncode == EXIT_INTERRUPTED and interrupted_line(proc.stderr) == f"interrupted: {REDO}"


def test_ctrl_c_during_an_odi_fit_stops_it_though_the_sampler_swallows_it(monkeypatch):
    """nutpie and PyMC take Ctrl-C as "stop and return the draws so far": ODI would have written its tables from a
    cut posterior as if it were the fit. The fit stops instead (then `run_app`'s one line), SIGINT's handler as it was."""
    from facet_probe.odi import fit

    def swallowing(model, settings):  # as nutpie's `sampler.wait()` and PyMC's draw loop do
        with contextlib.suppress(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        return "the draws so far", 0.0

    monkeypatch.setattr(fit, "_advi", swallowing)
    # Python's own handler, whatever an earlier test in this worker left (a non-callable one is not ours to handle)
    restore = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            fit.fit(None, fit.FitSettings(sampler="advi"))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, restore)


@pytest.mark.slow  # a process of its own (about 5 s): a real SIGINT to a real audit is the contract
def test_sigint_to_an_audit_is_one_line_exit_130_and_the_run_resumes(tmp_path):
    run = tmp_path / "run"
    args = ["model=seeded_random", "+model.latency_s=0.02", "facet=option_order", "dataset=synthetic_mcq", "limit=40"]
    # SIGINT as a terminal gives it: a test worker may run with SIGINT ignored (an earlier test's library set it),
    # which a child inherits, and Python then installs no Ctrl-C handler (the run went on to the end, exit 0)
    proc = subprocess.Popen([sys.executable, "-m", "facet_probe", f"hydra.run.dir={run}", "progress=false", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    trials_file = run / "trials.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (trials_file.exists() and trials_file.read_bytes().count(b"\n") >= 30):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    stored = trials_file.read_bytes().count(b"\n")
    assert proc.returncode == EXIT_INTERRUPTED, stderr
    assert interrupted_line(stderr) == (f"interrupted: Ctrl-C stopped the run; {stored} trials are stored in "
                                        f"{trials_file}; {RESUME}")
    assert 30 <= stored < 240, "the interrupt must land mid-run"

    resumed = run_module("facet_probe", f"hydra.run.dir={run}", "progress=false", *args)
    assert resumed.returncode == 0, resumed.stderr
    said = resumed.stdout + resumed.stderr
    assert f"({stored} already stored" in said, said
    keys = [json.loads(line)["trial_key"] for line in trials_file.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 240  # 40 items x 6 orderings, none lost, none twice
