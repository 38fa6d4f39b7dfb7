"""callbacks=mlflow: a real run (the app in this process) logs its config, summary and figures to MLflow's local
file store, read back with MLflow's client; without MLflow installed the same command says what to install."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import pytest

from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
AUDIT = ["model=oracle", "limit=2", "progress=false", "callbacks=mlflow"]


def run(args: list[str], tmp_path: Path) -> Ran:
    """`python -m facet_probe <args>` in this process, from `tmp_path`, with no tracking server of the shell's."""
    return run_module("facet_probe", *args, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": ""})


@pytest.mark.slow
def test_an_audit_with_callbacks_mlflow_logs_config_summary_and_figures(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow", reason="the tracking extra: pip install 'facet_probe[tracking]'")
    uri = (tmp_path / "mlruns").as_uri()
    proc = run([*AUDIT, f"out_root={tmp_path / 'out'}",
                f"hydra.callbacks.mlflow.tracking_uri={uri}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "MlflowCallback" not in proc.stderr  # Hydra reports a callback's failure only as a warning
    (run_dir,) = (tmp_path / "out").glob("*/*/*")

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    client = mlflow.MlflowClient(uri)
    (logged,) = client.search_runs([client.get_experiment_by_name("facet_probe").experiment_id])
    assert logged.data.params["model.name"] == "oracle" and logged.data.params["limit"] == "2"
    assert logged.data.tags["run_folder"] == str(run_dir) and logged.data.tags["status"] == "COMPLETED"
    summary = pd.read_csv(run_dir / "summary.csv")
    for row in summary.itertuples():
        assert logged.data.metrics[f"flip_rate/oracle/{row.facet}/{row.dataset}"] == pytest.approx(row.flip_rate)
    top = {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert {"config.yaml", "summary.csv", "report.md", "figures"} <= top
    figures = {Path(a.path).name for a in client.list_artifacts(logged.info.run_id, "figures")}
    assert figures == {p.name for p in (run_dir / "figures").glob("*.png")} and figures


def test_callbacks_mlflow_without_mlflow_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the tracking extra were not installed
    proc = run([*AUDIT, f"out_root={tmp_path / 'out'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'facet_probe[tracking]'" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- Weights & Biases (in-process, offline)

@pytest.mark.slow
def test_an_audit_with_callbacks_wandb_logs_config_summary_and_figures(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra: pip install 'facet_probe[wandb]'")
    from facet_probe import api
    from facet_probe_dev.testing.wandb_records import read_offline_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    (tmp_path / "wandb_dir").mkdir()
    run_dir = api.audit([*AUDIT[:3], "callbacks=wandb", f"out_root={tmp_path / 'out'}"]).run_dir
    assert "callbacks" not in run_dir.name  # a tracking callback changes no call, so it names no folder

    (folder,) = (tmp_path / "wandb_dir" / "wandb").glob("offline-run-*")
    logged = read_offline_run(folder)
    assert logged.config["model.name"] == "oracle" and logged.config["limit"] == "2"
    assert logged.name == run_dir.name and logged.notes == f"run folder: {run_dir}"
    assert logged.tags == ["audit", "completed"]
    summary = pd.read_csv(run_dir / "summary.csv")
    for row in summary.itertuples():
        assert logged.summary[f"flip_rate/oracle/{row.facet}/{row.dataset}"] == pytest.approx(row.flip_rate)
    assert {"run_config.yaml", "summary.csv", "report.md"} <= {p.name for p in logged.files.iterdir()}
    assert (logged.files / "summary.csv").read_bytes() == (run_dir / "summary.csv").read_bytes()
    assert "model:" in (logged.files / "run_config.yaml").read_text()
    figures = {p.name for p in (logged.files / "figures").glob("*.png")}
    assert figures == {p.name for p in (run_dir / "figures").glob("*.png")} and figures


def test_callbacks_wandb_without_wandb_says_what_to_install(tmp_path, monkeypatch, capsys):
    from facet_probe.__main__ import cli

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if W&B were not installed
    monkeypatch.setattr(sys, "argv", ["facet-probe", *AUDIT[:3], "callbacks=wandb", f"out_root={tmp_path / 'out'}"])
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as exit_:
        cli()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "pip install wandb" in line
    assert not (tmp_path / "out").exists()  # before any work


# ---------------------------------------------------------------- no secret in what a tracker keeps

PASSWORD = "s3cretPW42"


def secret_forms(user: str, password: str) -> list[str]:
    """A password as written, in the base64 of HTTP Basic auth, and percent-encoded with its user (a URL in a URL)."""
    return [password, base64.b64encode(f"{user}:{password}".encode()).decode(), quote(f"{user}:{password}@", safe="")]


@pytest.mark.slow  # a served audit and a tracker's run: 3-8 s
@pytest.mark.parametrize("tracker", ["wandb", "mlflow"])
def test_a_base_url_password_on_the_command_line_reaches_no_file_a_tracker_writes(tracker, tmp_path):
    """W&B's own run metadata copied the command line (sys.argv, which holds `model.base_url=http://user:pw@...`)
    into the `.wandb` record `wandb sync` uploads: every file under the tracker's folder and the run folder, binary
    ones included, is read for the password in each form."""
    pytest.importorskip(tracker, reason=f"pip install 'facet_probe[{'tracking' if tracker == 'mlflow' else 'wandb'}]'")
    tracked, out = tmp_path / tracker, tmp_path / "out"
    tracked.mkdir()
    wandb = tracker == "wandb"
    to = ([f"hydra.callbacks.wandb.dir={tracked}", "hydra.callbacks.wandb.mode=offline"] if wandb
          else [f"hydra.callbacks.mlflow.tracking_uri={tracked.as_uri()}"])
    with FakeProviderServer(served_models=("served-model",)) as server:
        proc = run_module("facet_probe", "model=openai_compat", "model.model_id=served-model",
                          f"model.base_url=http://user:{PASSWORD}@127.0.0.1:{server.port}/v1", "facet=option_order",
                          "dataset=synthetic_mcq", "limit=1", "progress=false", f"callbacks={tracker}",
                          f"out_root={out}", *to, cwd=tmp_path,
                          env={"WANDB_API_KEY": "", "MLFLOW_TRACKING_URI": "", "OPENAI_API_KEY": "sk-tracked-0123456789"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Callback" not in proc.stderr  # Hydra reports a callback's failure only as a warning
    written = [p for p in tracked.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in written) if wandb else any(p.name == "meta.yaml" for p in written)
    for form in secret_forms("user", PASSWORD):
        for root in (tracked, out):
            leaked = [str(p) for p in root.rglob("*") if p.is_file() and form.encode() in p.read_bytes()]
            assert leaked == [], f"{form!r} written to {leaked}"
        assert form not in proc.stdout + proc.stderr
