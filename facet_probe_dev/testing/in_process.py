"""The tests' one harness for the command-line apps: `run_module("facet_probe.report", "input=...")` runs what
`python -m facet_probe.report input=...` runs, in this process, and returns its exit code and what it printed,
shaped like `subprocess.CompletedProcess`. Starting Python again costs about 4 s of imports per command; tests
start a real process only where the process is what is tested (kill and resume, two-process locks,
`HYDRA_FULL_ERROR`, console scripts, the offline-imports check, the wheel build)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import TextIO

#: API keys never reach an app under test unless the test gives one (as a subprocess without them would run).
KEY_ENVS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY")
#: What every command runs under: offline, one thread each (as the suite's subprocesses did).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}


@dataclass
class Ran:
    """One command's outcome (the fields of `subprocess.CompletedProcess` that tests read)."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def entry_point(argv: Sequence[str]) -> tuple[Callable[[], object], list[str]]:
    """The function a command line runs and the `sys.argv` it sees: for `python -m <module>` (or
    `sys.executable -m <module>`, as a test's kill command reads) the module's (or its package's `__main__`)
    `cli()` (the judge's `main()`); else an installed console script's entry point."""
    if len(argv) > 2 and argv[0] in ("python", sys.executable) and argv[1] == "-m":
        module = argv[2]
        spec = importlib.util.find_spec(module)
        target = f"{module}.__main__" if spec is not None and spec.submodule_search_locations else module
        loaded = importlib.import_module(target)
        function = getattr(loaded, "cli", None) or getattr(loaded, "main", None)
        if function is None:
            raise AttributeError(f"{target} has no cli() or main() to run")
        return function, [module, *argv[3:]]
    script = next(iter(entry_points(group="console_scripts", name=argv[0])), None)
    if script is None:
        raise RuntimeError(f"no console script {argv[0]!r}: install the package (pip install -e .)")
    return script.load(), list(argv)


class _SysStream:
    """Whatever `sys.<name>` is when written to: where a library's log handler made during a run (bound to the
    run's captured output) writes afterwards, as it would have in a process whose import came before any run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        return getattr(sys, self.name).write(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()


def _settle_new_logger(logger: logging.Logger, captured: Mapping[str, TextIO]) -> None:
    """A logger first made during a run keeps what its library set on import (torch's: level WARNING, no
    propagation, a handler of its own), as in a process: reset, torch's INFO records reached the next runs'
    root handlers. What writes into the run goes: a log file is closed, the captured output re-pointed."""
    kept = []
    for handler in logger.handlers:
        if isinstance(handler, logging.FileHandler):
            handler.close()
            continue
        name = next((n for n, s in captured.items() if getattr(handler, "stream", None) is s), None)
        if name is not None and isinstance(handler, logging.StreamHandler):
            handler.setStream(_SysStream(name))  # type: ignore[arg-type]
        kept.append(handler)
    logger.handlers, logger.disabled = kept, False


def _loggers() -> list[logging.Logger]:
    """The root logger and every named one made so far."""
    return [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                   if isinstance(v, logging.Logger))]


@contextlib.contextmanager
def _kept_state(env: Mapping[str, str], drop: Sequence[str], cwd: Path | None,
                captured: Mapping[str, TextIO]) -> Iterator[None]:
    """Environment, argv, working folder and logging as they were, whatever the app changed (a logger the run
    made: `_settle_new_logger`) and Hydra's runtime config (`HydraConfig`: an app leaves it set; each starts with
    none, as in a fresh process); `captured` is the run's stdout and stderr, by name."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv[:], os.getcwd()
    saved_hydra_config = HydraConfig.instance().cfg
    saved_logs = {lg: (lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in _loggers()}
    GlobalHydra.instance().clear()
    HydraConfig.instance().cfg = None
    try:
        for key in drop:
            os.environ.pop(key, None)
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = saved_hydra_config
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
        for lg in _loggers():
            if lg not in saved_logs:
                _settle_new_logger(lg, captured)
                continue
            handlers, level, propagate, disabled = saved_logs[lg]
            for handler in lg.handlers:
                if handler not in handlers:
                    handler.close()
            lg.handlers, lg.level, lg.propagate, lg.disabled = handlers, level, propagate, disabled


def run_argv(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
             keys: bool = False) -> Ran:
    """A command line (`python -m <module> ...` or a console script's name and arguments) in this process: exit
    code (0 when it returned, its SystemExit code, 1 and the traceback on stderr for an uncaught exception, as
    Python would) and its stdout and stderr.

    `env` is added to the environment for the command only; API keys are removed unless `keys` (or `env` gives
    one), and `HYDRA_FULL_ERROR` too, so a developer's shell changes nothing."""
    argv = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    drop = ("HYDRA_FULL_ERROR",) + (() if keys else KEY_ENVS)
    with _kept_state({**OFFLINE_ENV, **(env or {})}, drop, Path(cwd) if cwd else None, {"stdout": out, "stderr": err}):
        function, sys.argv = entry_point(argv)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                returned = function()
                code = returned if isinstance(returned, int) else 0
            except SystemExit as stopped:
                code = stopped.code if isinstance(stopped.code, int) else (0 if stopped.code is None else 1)
                if not isinstance(stopped.code, int | None):
                    print(stopped.code, file=sys.stderr)
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001  (a crash: its traceback and exit 1, as from a process)
                traceback.print_exc()
                code = 1
    shown = [sys.executable, "-m", *argv[2:]] if argv[:2] in (["python", "-m"], [sys.executable, "-m"]) else argv
    return Ran(shown, code, out.getvalue(), err.getvalue())


def run_module(module: str, *args: str, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
            keys: bool = False) -> Ran:
    """`python -m <module> <args>` in this process (`run_argv`)."""
    return run_argv(["python", "-m", module, *map(str, args)], env=env, cwd=cwd, keys=keys)
