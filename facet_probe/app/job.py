"""An app's composed config run from Python as one job, the way Hydra's job runner runs it for the command line,
with Hydra's public pieces and no Hydra runtime (`HydraConfig` stays unset; the Python API, `facet_probe.api`).

Done as on the command line: the run folder (`hydra.run.dir`, made, and set as `hydra.runtime.output_dir` for
the callbacks), Hydra's record of the job in it (`.hydra/`: config.yaml, hydra.yaml, overrides.yaml; none with
`hydra.output_subdir=null`), `hydra.job.env_set`, `hydra.job.chdir`, the user's config folders
(`hydra.searchpath`) for configs looked up by name, and the job hooks of `hydra.callbacks` (secrets redacted from
`.hydra/`, `callbacks=mlflow` / `callbacks=wandb` tracking). Not done: Hydra's logging set-up (the caller's logging
is left alone), the run-level hooks (`on_run_start`, `on_run_end`) and sweeps (`-m`: use the command line)."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus, env_override
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from facet_probe.config.loading import searching


def run_job(cfg: DictConfig, task: Callable[[DictConfig], Any], whole_config: bool = False) -> Any:
    """Run `task` on the composed `cfg` (with its `hydra` node) as one job; what it returns, or its error raised
    once the callbacks have seen it. The task gets the config without its `hydra` node, as from Hydra's runner,
    or with it (`whole_config`: the audit reads its run folder and the command line's choices there)."""
    hydra = cfg.hydra
    run_dir = Path(str(hydra.run.dir)).absolute()
    with read_write(hydra.runtime), open_dict(hydra.runtime):
        hydra.runtime.output_dir = str(run_dir)
    task_cfg = task_config(cfg)
    callbacks = [instantiate(node) for node in (hydra.callbacks or {}).values()]
    run_dir.mkdir(parents=True, exist_ok=True)
    if hydra.output_subdir is not None:
        record_job(cfg, task_cfg, run_dir / str(hydra.output_subdir))
    job = JobReturn(overrides=[str(o) for o in hydra.overrides.task], cfg=task_cfg,
                    hydra_cfg=OmegaConf.masked_copy(cfg, "hydra"), task_name=str(hydra.job.name))
    error: Exception | None = None
    env = {str(key): str(value) for key, value in (hydra.job.env_set or {}).items()}
    with env_override(env), searching(hydra.searchpath), \
            contextlib.chdir(run_dir) if hydra.job.chdir else contextlib.nullcontext():
        job.working_dir = str(Path.cwd())
        notify(callbacks, "on_job_start", config=cfg, task_function=task)
        try:
            job.return_value, job.status = task(cfg if whole_config else task_cfg), JobStatus.COMPLETED
        except Exception as exc:  # the callbacks see a failed job too (a tracker logs it, a redaction still runs)
            job.return_value, job.status, error = exc, JobStatus.FAILED, exc
    notify(reversed(callbacks), "on_job_end", config=cfg, job_return=job)
    if error is not None:
        raise error
    return job.return_value


def task_config(cfg: DictConfig) -> DictConfig:
    """The config less its `hydra` node: the app's own settings, as a task sees them on the command line."""
    if "hydra" not in cfg:
        return cfg
    task = copy.deepcopy(cfg)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return task


def record_job(cfg: DictConfig, task_cfg: DictConfig, folder: Path) -> None:
    """`.hydra/` as Hydra's runner writes it: the app's config, Hydra's own and the overrides as given."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, node in (("config.yaml", task_cfg), ("hydra.yaml", OmegaConf.masked_copy(cfg, "hydra")),
                       ("overrides.yaml", cfg.hydra.overrides.task)):
        (folder / name).write_text(OmegaConf.to_yaml(node), encoding="utf-8")


def notify(callbacks: Iterable[Any], hook: str, **kwargs: Any) -> None:
    """Call one hook of each callback; a callback that fails is a warning, as in Hydra (the job's result stands)."""
    for callback in callbacks:
        try:
            getattr(callback, hook)(**kwargs)
        except Exception as exc:
            warnings.warn(f"Callback {type(callback).__name__}.{hook} raised {type(exc).__name__}: {exc}",
                          stacklevel=2)
