"""A damaged record of a run folder gives the same one line from every app that reads it: the line its reader in
`store.run_folder` raises, naming the file (and line) and what to do, exit code 2, no traceback, the trials left as
they are. Each app runs in this process (the shared harness of test_bad_input.py) and fails before any work: no
judge call, no ODI fit."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from facet_probe.app.sweep import job_record
from facet_probe.store.run_folder import FIX_CONFIG, FIX_ITEMS, FIX_MANIFEST, FIX_STATUS
from tests.e2e.test_bad_input import AUDIT, EXIT_USER_ERROR, RESUME, a_run, only_error, run_module, with_line

PAPER, EXPLORE, DECODER = "facet_probe.paper", "facet_probe.explore", "facet_probe.decoder"


def models_an_array(path: Path) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), "models": [1]}))


#: file -> (how it is damaged, the line its reader says: `{}` is the file's path)
DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "run_status.json": (models_an_array, "{}: not the record this file holds (Expected `object`, got `array` - at "
                                         f"`$.models`): the file was damaged; {FIX_STATUS}"),
    "manifest.parquet": (lambda p: p.write_bytes(p.read_bytes()[:300]),
                         f"{{}}: not a readable Parquet file (Parquet magic bytes not found in footer); {FIX_MANIFEST}"),
    "items.jsonl": (lambda p: with_line(p, 2, '{"dataset": "synthetic_mcq", "item'),
                    f"{{}}:2:30: not valid JSON (Unterminated string starting); {FIX_ITEMS}"),
}


def report(run: Path, tmp: Path) -> list[str]:
    return [f"input={run}", f"out={tmp / 'out'}"]


def judge(run: Path, tmp: Path) -> list[str]:  # a key and a closed port: the error must come before any call
    return [f"input={run}", "judge=gpt_54_mini", "judge.runner.base_url=http://127.0.0.1:9/v1"]


def odi(run: Path, tmp: Path) -> list[str]:
    return [f"input={run}", "dry_run=true"]


def paper(run: Path, tmp: Path, target: str = "table4-mitigation") -> list[str]:  # Table 4 reads the trials
    return [f"input={run}", f"out={tmp / 'out'}", f"target={target}"]


#: app -> what it is given
APPS = {"facet_probe.report": report, "facet_probe.judge": judge, "facet_probe.odi": odi, PAPER: paper,
        EXPLORE: report, DECODER: report}
#: (file, app[:paper target]): every app over every record, and the paper's figure that reads each model's status
CASES = [(file, app) for file in DAMAGES for app in APPS] + [("run_status.json", PAPER + ":fig-think-budget")]


@pytest.mark.parametrize(("file", "app"), CASES, ids=[f"{f}-{a.split('.')[-1]}" for f, a in CASES])
def test_a_damaged_record_is_the_same_line_from_every_app(file, app, tmp_path):
    """Before: run_status.json of another shape was an AttributeError traceback in every app (its `models` read
    with `.items()`), the paper's budget figure a JSONDecodeError, and ODI said every such line after `odi: `."""
    run = a_run(tmp_path)
    damage, says = DAMAGES[file]
    damage(run / file)
    stored = (run / "trials.jsonl").read_bytes()
    module, _, target = app.partition(":")
    args = APPS[module](run, tmp_path, *[target] if target else [])
    proc = run_module(module, *args, env={"OPENAI_API_KEY": "sk-test"})
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_USER_ERROR, proc.stdout + proc.stderr
    assert only_error(proc.stderr) == f"error: {says.format(run / file)}"
    assert (run / "trials.jsonl").read_bytes() == stored


def test_an_older_folders_damaged_config_is_one_line_from_the_audit(tmp_path):
    """A folder without run_identity.json is checked against its config.yaml: a damaged one was YAML's traceback."""
    run = a_run(tmp_path)
    (run / "run_identity.json").unlink()
    (run / "config.yaml").write_text("k: [2\n")
    proc = run_module(AUDIT, f"hydra.run.dir={run}", *RESUME)
    assert "Traceback" not in proc.stderr, proc.stderr
    line = only_error(proc.stderr)
    assert proc.returncode == EXIT_USER_ERROR and line.startswith(f"error: {run / 'config.yaml'}: not readable YAML (")
    assert line.endswith(FIX_CONFIG)


def test_a_sweep_job_with_a_damaged_status_says_so_in_its_row(tmp_path):
    """The sweep read a damaged run_status.json as {}: the job's row said nothing of it."""
    (tmp_path / "run_status.json").write_text('{"state": "complete", "models": {')
    config = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path)}, "job": {"num": 0}}})
    record = job_record(config, JobReturn(overrides=["k=2"], status=JobStatus.COMPLETED), 1.0)
    assert record.state == "complete" and record.trials == {"planned": 0, "called": 0, "errors": 0}
    assert record.error == (f"{tmp_path / 'run_status.json'}:1:34: not valid JSON (Expecting property name enclosed "
                            f"in double quotes): the file was damaged; {FIX_STATUS}")
