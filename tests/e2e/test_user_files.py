"""No app deletes or overwrites a file it did not write (issue 61, point 4): ODI replaced its `modal/` and `correct/`
folders whole (a user's `modal/notes.txt` was lost), the report and the explorer removed any file of theirs named
like a chunk file, a sweep removed its `.sweep_jobs/` whole, and every app wrote its files into any folder `out=`
named, over the user's files of the same names.

The rule (docs/bad_input.md, "Output folders"): an app writes into a new or empty folder or its own earlier output
(its marker file), else it refuses in one line, exit 2, nothing touched; in its own folder it replaces only its own
files, by name, and removes only files it recorded writing. Each app runs in this process (`run_module`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from facet_probe.app.sweep import SweepStatus
from facet_probe.report.explorer import page as page_module
from tests.e2e.test_bad_input import EXIT_USER_ERROR, a_run, only_error, run_module

#: A user's files: notes beside ours, one in a subfolder named like one of ours, one named like a chunk file.
MINE = {"notes.txt": "my notes", "modal/notes.txt": "my notes on the modal fit", "figures/notes.txt": "my figure notes",
        "explorer_data/0123456789ab-0000.js": "my script, named like a chunk file"}


def plant(folder: Path, files: dict[str, str]) -> dict[str, bytes]:
    """Write `files` (relative path -> text) under `folder`; return every file there, by path, with its bytes."""
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return snapshot(folder)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def kept(folder: Path, files: dict[str, str]) -> bool:
    return all((folder / rel).is_file() and (folder / rel).read_text() == text for rel, text in files.items())


#: (app, its arguments given a finished run folder and the output folder, a file of the user's named like one of
#: the app's outputs, which the app wrote over, or None)
APPS = [
    ("facet_probe.report", lambda run, out: [f"input={run}", f"out={out}", "bootstrap=10"], "summary.csv"),
    ("facet_probe.explore", lambda run, out: [f"input={run}", f"out={out}"], "explorer_data/0123456789ab-0001.js"),
    ("facet_probe.odi", lambda run, out: [f"input={run}", f"out={out}", "odi=smoke"], "modal/theta.csv"),
    ("facet_probe.paper", lambda run, out: [f"input={run}", f"out={out}", "target=table1", "bootstrap=10"],
     "table1.csv"),
    ("facet_probe.decoder", lambda run, out: [f"input={run}", f"out={out}", "bootstrap=10"],
     None),  # its only outputs are its markers
    ("facet_probe.attack", lambda run, out: [f"hydra.run.dir={out}", "limit=1", "attack.steps=1", "progress=false"],
     "summary.csv"),
]


def repeated_run(tmp: Path) -> Path:
    """A finished run of two asks per ordering: the decoder app's input (it refuses a run without repeats)."""
    folder = tmp / "run"
    done = run_module("facet_probe", f"hydra.run.dir={folder}", "progress=false", "model=oracle", "facet=option_order",
                      "dataset=synthetic_mcq", "limit=2", "k=2", "repeats=2", "bootstrap=10")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.parametrize(("app", "args", "ours"), APPS, ids=[a[0].split(".")[-1] for a in APPS])
def test_every_app_refuses_a_folder_of_the_users_and_touches_nothing(app, args, ours, tmp_path):
    run, out = (repeated_run if app == "facet_probe.decoder" else a_run)(tmp_path), tmp_path / "mine"
    before = plant(out, {**MINE, **({ours: "the user's own file of that name"} if ours else {})})
    proc = run_module(app, *args(run, out))
    assert proc.returncode == EXIT_USER_ERROR, proc.stderr
    line = only_error(proc.stderr)
    assert str(out) in line and "holds files that" in line and "did not write" in line, line
    assert "choose a new" in line and "or remove that folder" in line, line
    after = {rel: data for rel, data in snapshot(out).items() if not rel.startswith((".hydra/", "attack.log"))}
    assert after == before  # nothing written, nothing removed (the attack: Hydra's own files of this run aside)


def test_a_file_where_the_output_folder_should_be_is_one_line(tmp_path):
    run, out = a_run(tmp_path), tmp_path / "out.csv"
    out.write_text("a user's file")
    proc = run_module("facet_probe.report", f"input={run}", f"out={out}")
    assert proc.returncode == EXIT_USER_ERROR
    assert only_error(proc.stderr) == (f"error: out={out} is a file, not a folder: give out= a new folder for the "
                                       "report's outputs")
    assert out.read_text() == "a user's file"


def test_the_report_and_the_explorer_keep_a_users_files_in_their_own_folder(tmp_path, monkeypatch):
    """The report's folder (here its default, the run folder) with a user's files, one named like a chunk file:
    each rebuild of the report and of the page keeps them; a page built over chunk files removes only its own."""
    run = a_run(tmp_path)
    plant(run, MINE)
    monkeypatch.setattr(page_module, "INLINE_BYTES", 0)  # the page's data in chunk files beside it
    for app, *settings in (("facet_probe.report", "bootstrap=10"), ("facet_probe.explore",),
                           ("facet_probe.report", "bootstrap=10")):
        proc = run_module(app, f"input={run}", *settings)
        assert proc.returncode == 0, proc.stderr
        assert kept(run, MINE), app
    written = page_module.written_chunks(run)
    assert written and set(p.name for p in (run / "explorer_data").glob("*.js")) == written | {"0123456789ab-0000.js"}


def fake_fit(data, run, folder: Path, compiled=None):
    """Writes what `odi.pipeline.fit_outcome` writes (no sampling: the folder's handling is what is tested)."""
    from facet_probe.odi.pipeline import OUTCOME_FILES

    for rel in OUTCOME_FILES[:-1]:  # all but posterior.nc (save_idata=false)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(f"{data.outcome} fit\n")


def test_an_odi_refit_keeps_a_users_files_in_its_outcome_folders(tmp_path, monkeypatch):
    """A refit into ODI's own folder swaps each outcome folder in whole: a user's files there (`modal/notes.txt`, in
    `modal/figures/`) are carried into the new folder; an earlier fit's posterior.nc, not written again, is dropped."""
    monkeypatch.setattr("facet_probe.odi.pipeline.fit_outcome", fake_fit)
    run, out = a_run(tmp_path), tmp_path / "odi"
    args = [f"input={run}", f"out={out}", "odi=smoke"]
    assert run_module("facet_probe.odi", *args).returncode == 0
    mine = {"notes.txt": "my notes", "modal/notes.txt": "mine", "modal/figures/mine.png": "my figure",
            "correct/drafts/a.txt": "my draft"}
    plant(out, {**mine, "modal/posterior.nc": "an earlier fit's draws"})
    proc = run_module("facet_probe.odi", *args)
    assert proc.returncode == 0, proc.stderr
    assert kept(out, mine) and (out / "modal" / "theta.csv").read_text() == "modal fit\n"
    assert not (out / "modal" / "posterior.nc").exists()
    assert not [p for p in out.rglob(".*")], "a temp folder was left beside the outputs"


def sweep_config(sweep_dir: Path, app: str = "audit"):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}, "job": {"name": app}}})


def test_a_new_sweep_removes_only_the_job_records_of_the_earlier_one(tmp_path):
    """`.sweep_jobs/` was removed whole at each sweep's start: now only the files that are job records."""
    jobs = tmp_path / ".sweep_jobs"
    record = '{"num": 0, "overrides": [], "run_dir": "x", "state": "complete", "exit_code": 0}'
    plant(tmp_path, {"multirun.yaml": "{}", ".sweep_jobs/job-0.json": record, ".sweep_jobs/job-1.json": "{}",
                     ".sweep_jobs/notes.txt": "mine"})
    SweepStatus().on_multirun_start(sweep_config(tmp_path))
    assert sorted(p.name for p in jobs.iterdir()) == ["job-1.json", "notes.txt"]  # job-1.json holds no record


def test_an_audit_sweep_into_a_folder_of_the_users_is_refused_before_any_job(tmp_path):
    """Its cross-model report (report.md, summary.csv, figures/) goes to the sweep's root."""
    before = plant(tmp_path, {"report.md": "my report"})
    with pytest.raises(SystemExit) as stopped:  # Hydra turns a callback's exception into a warning, and goes on
        SweepStatus().on_multirun_start(sweep_config(tmp_path))
    assert stopped.value.code == EXIT_USER_ERROR
    SweepStatus().on_multirun_start(sweep_config(tmp_path, "attack"))  # no report at an attack sweep's root
    proc = run_module("facet_probe", "-m", "model=oracle", "limit=1", "progress=false", f"hydra.sweep.dir={tmp_path}")
    assert proc.returncode == EXIT_USER_ERROR and "hydra.sweep.dir=" in only_error(proc.stderr), proc.stderr
    assert snapshot(tmp_path) == before
