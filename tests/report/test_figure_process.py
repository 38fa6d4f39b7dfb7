"""A large report draws its figures in a helper process: the same PNGs, byte for byte, as drawn in the report's
own process, and a helper that dies is replaced by drawing there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from facet_probe.report import figure_process
from facet_probe.report import run as report_run
from facet_probe.report.figure_process import FigureDrawer
from facet_probe.store import reading
from tests.report.test_figures import ordering, summary
from tests.report.test_run_report import image_set_trials, write

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # each test starts a Python process (about 1.5 s of CPU for its imports)


def test_a_report_over_the_helpers_bound_draws_in_a_helper_the_figures_its_own_process_draws(tmp_path, monkeypatch):
    answers = {f"mantis_eval::{i}": ["A", "B", "A", "C", "A", "A"][: 3 + i % 4] for i in range(12)}
    here = write(image_set_trials(answers), tmp_path / "here")
    monkeypatch.setattr(report_run, "HELPER_MIN_TRIALS", 1)  # any report is "large"
    helpers = []
    real_init = FigureDrawer.__init__

    def spy(self, helper):
        real_init(self, helper)
        helpers.append(helper)

    monkeypatch.setattr(FigureDrawer, "__init__", spy)
    helped = write(image_set_trials(answers), tmp_path / "helped")
    assert helpers == [True]
    pngs = [p for p in helped.files if p.suffix == ".png"]
    assert [p.name for p in pngs] == list(figure_process.ReportFigures.NAMES)
    for png in pngs:
        assert png.read_bytes() == (tmp_path / "here" / "figures" / png.name).read_bytes(), png.name
    assert [p.name for p in here.files] == [p.name for p in helped.files]


def test_the_report_app_starts_the_helper_before_it_reads_when_the_inputs_look_large(tmp_path, monkeypatch):
    import json

    from facet_probe.report import __main__ as report_app
    from facet_probe_dev.testing.in_process import run_module
    from tests.report.test_report_cli import reference_trial

    src = tmp_path / "trials.jsonl"
    answers = {i: ["A"] * 6 if i % 2 else ["A", "B"] * 3 for i in range(4)}  # half the items flip
    src.write_text("".join(json.dumps(reference_trial(f"mmlu_pro::{i}", k, answers[i][k])) + "\n"
                           for i in range(4) for k in range(6)))
    events = []
    real_init, real_read = FigureDrawer.__init__, report_app.read_run
    monkeypatch.setattr(FigureDrawer, "__init__", lambda self, helper: (events.append(("drawer", helper)),
                                                                        real_init(self, helper))[-1])
    monkeypatch.setattr(report_app, "read_run", lambda path: (events.append(("read", path)), real_read(path))[-1])
    monkeypatch.setattr(report_app, "HELPER_MIN_TRIALS", src.stat().st_size // reading.TRIAL_BYTES_HINT)
    proc = run_module("facet_probe.report", f"input={src}", f"out={tmp_path / 'helped'}", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert events == [("drawer", True), ("read", src)]  # one drawer, its helper started before the read
    monkeypatch.setattr(report_app, "HELPER_MIN_TRIALS", src.stat().st_size // reading.TRIAL_BYTES_HINT + 1)
    events.clear()
    proc = run_module("facet_probe.report", f"input={src}", f"out={tmp_path / 'here'}", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert events == [("drawer", False), ("read", src)]
    for name in figure_process.ReportFigures.NAMES:
        assert (tmp_path / "helped" / "figures" / name).read_bytes() == (tmp_path / "here" / "figures" / name
                                                                         ).read_bytes(), name


def test_the_helper_is_another_process_and_one_that_died_is_replaced_by_drawing_here(tmp_path):
    job = figure_process.ReportFigures(summary(), ordering())
    parts = [figure_process.ReportFigures(ordering=job.ordering), figure_process.ReportFigures(summary=job.summary)]
    with FigureDrawer(helper=True) as drawer:  # a live helper draws, and `wait` returns once it has
        assert drawer.helper is not None and drawer.helper.pid != os.getpid()
        drawer.draw(job, tmp_path / "helper")
        drawer.wait()
        assert drawer.helper.returncode == 0
    with FigureDrawer(helper=True) as drawer:  # the parts one by one, as a report hands them over
        assert [p.name for part in parts for p in drawer.draw(part, tmp_path / "parts")] == [
            "accuracy_per_ordering.png", "flip_rate_per_cell.png", "accuracy_vs_flip.png"]
        drawer.wait()
        assert drawer.helper.returncode == 0
    with FigureDrawer(helper=True) as drawer:  # dead before it is given the figures
        drawer.helper.kill()
        drawer.helper.wait()
        drawer.draw(job, tmp_path / "dead_before")
        drawer.wait()
    with FigureDrawer(helper=True) as drawer:  # given the figures in two parts, then killed before it drew them
        drawer.helper.send_signal(signal.SIGSTOP)
        for part in parts:
            drawer.draw(part, tmp_path / "dead_after")
        drawer.helper.kill()
        drawer.wait()
        assert drawer.helper.returncode == -signal.SIGKILL
    for name in figure_process.ReportFigures.NAMES:
        drawn = (tmp_path / "helper" / name).read_bytes()
        assert drawn[:4] == b"\x89PNG"
        assert (tmp_path / "parts" / name).read_bytes() == drawn
        assert (tmp_path / "dead_before" / name).read_bytes() == drawn
        assert (tmp_path / "dead_after" / name).read_bytes() == drawn


def test_a_drawer_left_without_drawing_ends_its_helper():
    with FigureDrawer(helper=True) as drawer:
        helper = drawer.helper
    assert helper.poll() is not None


REPORT_THAT_DIES = """
import os, sys
from pathlib import Path
from facet_probe.report import figure_process
from facet_probe.report.figure_process import FigureDrawer
from tests.report.test_figures import ordering, summary
drawer = FigureDrawer(helper=True)
drawer.draw(figure_process.ReportFigures(summary(), ordering()), Path(sys.argv[1]))
print(drawer.helper.pid, flush=True)
os._exit(0)  # dies as a killed report would: no wait, no cleanup
"""


def test_a_helper_whose_report_died_writes_no_figure(tmp_path):
    """The report hands over its figures and dies before the helper has started: another report of the folder
    may be writing its own figures by then, so the helper draws none."""
    done = subprocess.run([sys.executable, "-c", REPORT_THAT_DIES, str(tmp_path / "figures")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    helper = int(done.stdout.split()[0])
    deadline = time.monotonic() + 60
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(helper)
    assert not (tmp_path / "figures").exists() or not list((tmp_path / "figures").iterdir())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
