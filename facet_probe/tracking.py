"""Optional experiment tracking: a Hydra callback that logs a finished run's config, summary and figures to MLflow.

    python -m facet_probe callbacks=mlflow [hydra.callbacks.mlflow.tracking_uri=file:///path/mlruns]

Asked for per run (`callbacks=mlflow`, conf/callbacks/mlflow.yaml); MLflow (`pip install 'facet_probe[tracking]'`,
mlflow-skinny) is imported only then. What is logged is what the run folder holds, secrets redacted: the
config as parameters and `config.yaml`, every number of `summary.csv` as a metric per cell, the CSV tables,
`report.md` and `figures/` as artifacts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from facet_probe.config_loading import ConfigError
from facet_probe.redact import redact_config

#: MLflow's limit on a parameter value's length (longer values are cut, not refused).
MAX_PARAM = 6000
#: The columns of a summary row that name its cell (the metric key), not a number to log.
CELL_COLUMNS = ("model", "facet", "dataset")


class MlflowCallback(Callback):
    """At the end of each job (a single run or each job of a sweep), one MLflow run with the job's outputs."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "facet_probe") -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no call home from a run (no network)
        if str(tracking_uri or "").startswith("file:"):  # asked for by name: MLflow 3 keeps it behind this switch
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        try:
            import mlflow  # noqa: F401, PLC0415  (optional: only a run that asks for tracking imports it)
        except ImportError:
            raise ConfigError("callbacks=mlflow needs MLflow: pip install 'facet_probe[tracking]' "
                              "(mlflow-skinny), or leave callbacks= out") from None
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
                mlflow.log_metrics(summary_metrics(folder / "summary.csv"))
                for path in [*sorted(folder.glob("*.csv")), folder / "report.md"]:
                    if path.is_file():
                        mlflow.log_artifact(str(path))
                if (folder / "figures").is_dir():
                    mlflow.log_artifacts(str(folder / "figures"), "figures")


def output_folder(config: DictConfig, job_return: JobReturn) -> Path | None:
    """The folder the app returned (a report's `out`, an audit's run folder), else Hydra's job folder."""
    if job_return.status == JobStatus.COMPLETED and job_return.return_value is not None:
        return Path(job_return.return_value)
    out = OmegaConf.select(config, "hydra.runtime.output_dir")
    return Path(out) if out else None


def config_params(cfg: DictConfig) -> dict[str, str]:
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
