"""The apps as Python functions (notebooks, other harnesses): the same configs as the command line, no Hydra CLI.

    from facet_probe import run_audit
    result = run_audit(["model=oracle", "limit=2"])    # or {"model": "oracle", "limit": 2}
    result.run_dir, result.frames["summary"]

Each call composes the app's config exactly as its command line does (the package's config folder, plus any
`hydra.searchpath=` you pass; Hydra's public compose API), runs the same task function as one job with no Hydra
runtime (`app.job`: the run folder, `.hydra/`, the callbacks' job hooks such as `callbacks=mlflow`; not Hydra's
logging set-up, your logging is left alone, nor sweeps) and returns the output folder with the CSV tables written
there. The audit runs as `app.audit_job.run_audit(cfg)`, the attack as `attack.run.run_attack(cfg, out_dir)`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from facet_probe.config import schema
from facet_probe.config.loading import CONFIG_MODULE, ConfigError
from facet_probe.config.overrides import override_value, set_fields  # noqa: F401 (part of the API)

#: What a call takes: command-line overrides, a mapping of keys (dotted or nested) to values, or a dataclass
#: instance (its fields set away from their defaults), e.g. ["model=oracle"], {"model": "oracle"}.
Config = Sequence[str] | Mapping[str, Any] | Any | None


@dataclass(frozen=True)
class RunResult:
    """An app's output folder (None for a dry run that writes nothing) and the CSV tables in it, by file stem."""

    run_dir: Path | None
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.frames[name]

    def __repr__(self) -> str:
        """The folder and each table's name and shape (rows x columns), not every table's rows: a printed result
        stays a few lines. Read a table with `result["summary"]`."""
        tables = ", ".join(f"{name}: {len(f)}x{f.shape[1]}" for name, f in self.frames.items())
        folder = None if self.run_dir is None else str(self.run_dir)
        return f"RunResult(run_dir={folder!r}, frames={{{tables}}})"


@dataclass(frozen=True)
class App:
    """A command-line app: its primary config and its task (`module:function`, composed config -> folder)."""

    config_name: str
    task: str
    shell: str | None = None  # the app's shell module, where the task's own module does not register the schema
    whole_config: bool = False  # the task reads the config's `hydra` node (run folder, choices), not only its own

    def function(self) -> Callable[[DictConfig], Path | None]:
        """The task; importing its module (and the shell) registers the app's schema and resolvers."""
        if self.shell:
            importlib.import_module(self.shell)
        module, _, name = self.task.partition(":")
        return getattr(importlib.import_module(module), name)


AUDIT = App("config", "facet_probe.app.audit_job:run_audit", shell="facet_probe.__main__", whole_config=True)
ATTACK = App("attack_app", "facet_probe.api:_attack_task", shell="facet_probe.attack.__main__", whole_config=True)
REPORT = App("report_app", "facet_probe.report.__main__:report")
JUDGE = App("judge_app", "facet_probe.judge.__main__:judge_folders")
ODI = App("odi_app", "facet_probe.odi.__main__:odi_app")
PAPER = App("paper_app", "facet_probe.paper.__main__:build")


def audit(config: Config = None) -> RunResult:
    """`python -m facet_probe <overrides>`: an order-sensitivity audit (resumes in its run folder)."""
    return run(AUDIT, config)


def attack(config: Config = None) -> RunResult:
    """`python -m facet_probe.attack <overrides>`: an adversarial chain-of-thought attack."""
    return run(ATTACK, config)


def report(config: Config = None) -> RunResult:
    """`python -m facet_probe.report input=...`: metrics, tables and figures from stored trials."""
    return run(REPORT, config)


def judge(config: Config = None) -> RunResult:
    """`python -m facet_probe.judge input=... judge=<name>`: an LLM judge over finished run folders (its verdicts
    cached in each folder's judgments.jsonl); the folder's judge tables are the result's frames."""
    return run(JUDGE, config)


def odi(config: Config = None) -> RunResult:
    """`python -m facet_probe.odi input=...`: the Bayesian order-decomposition model."""
    return run(ODI, config)


def paper(config: Config = None) -> RunResult:
    """`python -m facet_probe.paper input=...`: the papers' tables and figures from run folders."""
    return run(PAPER, config)


def _attack_task(cfg: DictConfig) -> Path:
    """The attack app's task, in the run folder the command line would make for it (`hydra.runtime.output_dir`)."""
    from facet_probe.app.job import task_config  # noqa: PLC0415
    from facet_probe.attack.run import run_attack  # noqa: PLC0415  (torch and the attack only when asked)

    return run_attack(task_config(cfg), Path(cfg.hydra.runtime.output_dir))


def run(app: App, config: Config = None) -> RunResult:
    """Compose `app`'s config from `config` and run its task as the command line would (`app.job`); a config the
    command line refuses raises ConfigError with the message the command line prints."""
    from facet_probe.app.job import run_job  # noqa: PLC0415  (the apps' errors and Hydra's callbacks: once run)

    task = app.function()
    with _composed(app, overrides_of(config)) as cfg:
        out = _user_errors(lambda: run_job(cfg, task, whole_config=app.whole_config))
    return RunResult(Path(out) if out is not None else None, frames_in(out))


@contextmanager
def _composed(app: App, overrides: list[str]) -> Iterator[DictConfig]:
    """The app's composed config, with its `hydra` node, while the package's configs are Hydra's for the call."""
    if GlobalHydra.instance().is_initialized():
        raise ConfigError("facet_probe.api runs an app of its own: call it outside a running Hydra app "
                          "(or run the app's command line instead)")
    schema.register()  # the resolvers every app's config may read (judge_app's fp_first_path), idempotent
    with initialize_config_module(CONFIG_MODULE, version_base="1.3", job_name=app.config_name):
        yield _user_errors(lambda: compose(app.config_name, overrides=overrides, return_hydra_config=True))


def _user_errors(action: Callable[[], Any]) -> Any:
    """Run `action`; an error the command line shows as one line (cli.user_message) raises ConfigError with
    that line, other user errors (RunnerError, ...) and crashes propagate as they are."""
    from facet_probe.app.boundary import USER_ERRORS, user_message  # noqa: PLC0415  (cli imports the runners' errors)

    try:
        return action()
    except USER_ERRORS:
        raise
    except Exception as exc:
        message = user_message(exc)  # Hydra refusing the overrides, a class refusing its settings
        if message is None:
            raise
        raise ConfigError(message) from None


def frames_in(folder: Path | str | None) -> dict[str, pd.DataFrame]:
    """The CSV tables at the top of an output folder, by file stem ({} for none)."""
    if folder is None or not Path(folder).is_dir():
        return {}
    return {p.stem: pd.read_csv(p) for p in sorted(Path(folder).glob("*.csv"))}


# ---------------------------------------------------------------- configs as overrides

def overrides_of(config: Config) -> list[str]:
    """Command-line overrides for a list of them, a mapping (nested or dotted keys) or a dataclass instance."""
    if config is None:
        return []
    if isinstance(config, str):
        raise ConfigError(f"config {config!r}: give a list of overrides ([{config!r}]), a dict or a dataclass")
    if isinstance(config, type):
        raise ConfigError(f"config {config.__name__}: give an instance ({config.__name__}(...)), not the class")
    if dataclasses.is_dataclass(config):
        config = set_fields(config)
    if isinstance(config, Mapping):
        return [f"{key}={override_value(value)}" for key, value in _flatten(config)]
    return [str(o) for o in config]


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


