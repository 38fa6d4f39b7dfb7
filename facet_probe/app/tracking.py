"""Optional experiment tracking: Hydra callbacks that log a finished run's config, summary and figures to MLflow
or to Weights & Biases.

    python -m facet_probe callbacks=mlflow [hydra.callbacks.mlflow.tracking_uri=file:///path/mlruns]
    python -m facet_probe callbacks=wandb [hydra.callbacks.wandb.project=facet_probe] [hydra.callbacks.wandb.mode=offline]

Asked for per run (`callbacks=mlflow` / `callbacks=wandb`, conf/callbacks/); the library (`pip install
'facet_probe[tracking]'` for mlflow-skinny, `pip install 'facet_probe[wandb]'`) is imported only then; without
it the run stops before any work, naming that command (facet_probe.core.extras). What is logged is what
the run folder holds, secrets redacted: the config as parameters and `config.yaml` (`run_config.yaml` in W&B,
whose own `config.yaml` is its run's config), every number of `summary.csv` as a metric per cell, the CSV
tables, `report.md` and `figures/` as files. Nothing else: W&B's own capture of the command line, the program,
git state and code (its run metadata, which would copy a `base_url=http://user:password@...` override) is off
(`WANDB_SETTINGS`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf

from facet_probe.core.extras import require
from facet_probe.core.redact import redact_config
from facet_probe.store.run_folder import REPORT_PAGE, SUMMARY_FILE

#: MLflow's limit on a parameter value's length (longer values are cut, not refused).
MAX_PARAM = 6000
#: The columns of a summary row that name its cell (the metric key), not a number to log.
CELL_COLUMNS = ("model", "facet", "dataset")
#: `wandb.Settings` of every run: no console capture, and none of what W&B records on its own, which would copy
#: secrets: `x_disable_meta` its run metadata (the command line, i.e. sys.argv, program, host, git remote and
#: commit), `disable_git` and `disable_code`/`save_code` the git state and the source files.
WANDB_SETTINGS: dict[str, Any] = {"console": "off", "quiet": True, "x_disable_meta": True, "disable_git": True,
                  "disable_code": True, "save_code": False}


class MlflowCallback(Callback):
    """At the end of each job (a single run or each job of a sweep), one MLflow run with the job's outputs."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "facet_probe") -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no call home from a run (no network)
        if str(tracking_uri or "").startswith("file:"):  # asked for by name: MLflow 3 keeps it behind this switch
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        # optional: only a run that asks for tracking imports it
        require("mlflow", "tracking", "callbacks=mlflow", "MLflow (mlflow-skinny)", instead="leave callbacks= out")
        self.tracking_uri = tracking_uri
        self.experiment = experiment

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        import mlflow  # noqa: PLC0415

        folder = output_folder(config, job_return)
        if self.tracking_uri:
            mlflow.set_tracking_uri(self.tracking_uri)
        mlflow.set_experiment(self.experiment)
        task = redact_config(job_return.cfg if job_return.cfg is not None else config)
        with mlflow.start_run(run_name=folder.name if folder else str(config.hydra.job.name)):
            mlflow.set_tags({"app": str(config.hydra.job.name), "status": job_return.status.name,
                             "run_folder": str(folder) if folder else ""})
            mlflow.log_params(config_params(task))
            mlflow.log_text(OmegaConf.to_yaml(task), "config.yaml")
            if folder is not None and folder.is_dir():
                mlflow.log_metrics(summary_metrics(folder / SUMMARY_FILE))
                for path in logged_files(folder):
                    mlflow.log_artifact(str(path))
                if (folder / "figures").is_dir():
                    mlflow.log_artifacts(str(folder / "figures"), "figures")


class WandbCallback(Callback):
    """At the end of each job, one W&B run with the job's outputs, as `MlflowCallback` logs them; `mode=offline`
    (or WANDB_MODE=offline) writes it under `dir` (WANDB_DIR) for `wandb sync` later."""

    def __init__(self, project: str = "facet_probe", entity: str | None = None, mode: str | None = None,
                 dir: str | None = None) -> None:  # noqa: A002  (W&B's own name for the setting)
        # optional: only a run that asks for tracking imports it
        require("wandb", "wandb", "callbacks=wandb", "Weights & Biases",
                instead="pip install wandb, or leave callbacks= out")
        self.project, self.entity, self.mode, self.dir = project, entity, mode, dir

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        import wandb  # noqa: PLC0415

        folder = output_folder(config, job_return)
        task = redact_config(job_return.cfg if job_return.cfg is not None else config)
        app = str(config.hydra.job.name)
        # WANDB_MODE / WANDB_DIR as they are now: W&B itself reads them once per process (a second app run in it kept
        # the first one's folder)
        run = wandb.init(project=self.project, entity=self.entity,
                         mode=self.mode or os.environ.get("WANDB_MODE"),  # type: ignore[arg-type]  # W&B checks the text
                         dir=self.dir or os.environ.get("WANDB_DIR"),
                         name=folder.name if folder else app, job_type=app,
                         tags=[app, job_return.status.name.lower()], notes=f"run folder: {folder or ''}",
                         config=config_params(task), settings=wandb.Settings(**WANDB_SETTINGS))
        try:
            files = Path(run.dir)  # written here, uploaded (or kept offline) when the run finishes
            (files / "run_config.yaml").write_text(OmegaConf.to_yaml(task))
            if folder is not None and folder.is_dir():
                if metrics := summary_metrics(folder / SUMMARY_FILE):
                    run.log(metrics)
                for path in logged_files(folder):
                    shutil.copy2(path, files / path.name)
                if (folder / "figures").is_dir():
                    shutil.copytree(folder / "figures", files / "figures", dirs_exist_ok=True)
        finally:
            run.finish(exit_code=0 if job_return.status == JobStatus.COMPLETED else 1)


def logged_files(folder: Path) -> list[Path]:
    """The run folder's files a tracker keeps beside its numbers: the CSV tables and report.md."""
    return [p for p in [*sorted(folder.glob("*.csv")), folder / REPORT_PAGE] if p.is_file()]


def output_folder(config: DictConfig, job_return: JobReturn) -> Path | None:
    """The folder the app returned (a report's `out`, an audit's run folder), else Hydra's job folder."""
    if job_return.status == JobStatus.COMPLETED and job_return.return_value is not None:
        return Path(job_return.return_value)
    out = OmegaConf.select(config, "hydra.runtime.output_dir")
    return Path(out) if out else None


def config_params(cfg: DictConfig | ListConfig) -> dict[str, str]:
    """The config flattened to dotted keys (`model.name`, `limit`), values as text, unresolvable ones as written."""
    flat = pd.json_normalize(OmegaConf.to_container(cfg, resolve=False), sep=".").to_dict("records")[0]
    return {key: str(value)[:MAX_PARAM] for key, value in flat.items()}


def summary_metrics(path: Path) -> dict[str, float]:
    """Every number of summary.csv as `<column>/<model>/<facet>/<dataset>` ({} without the file)."""
    if not path.is_file():
        return {}
    frame = pd.read_csv(path)
    cells = [c for c in CELL_COLUMNS if c in frame.columns]
    numbers = frame.select_dtypes("number").columns.difference(cells)
    out = {}
    for row in frame.to_dict("records"):
        cell = "/".join(_key(row[c]) for c in cells)
        for column in numbers:
            if pd.notna(row[column]):
                out[f"{column}/{cell}" if cell else column] = float(row[column])
    return out


def _key(value: Any) -> str:
    """A cell name as MLflow allows in a metric key (letters, digits, `_-. /`)."""
    return re.sub(r"[^\w\-. ]", "_", str(value))
