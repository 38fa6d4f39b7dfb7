"""What the command-line apps share: user errors become one clear line, and exit codes that a sweep or a
script can tell apart.

Exit codes (documented in the README):
    0  the run is complete
    2  a user error (bad config, input or data): one line says what, where and what to do
    3  the run finished but is incomplete (trials missing after retries); re-run the same command
    other  a crash (a bug): the traceback is shown
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from facet_probe.config_loading import ConfigError
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.items import ItemError
from facet_probe.locking import RunLocked
from facet_probe.runners.base import RunnerError

EXIT_USER_ERROR = 2
EXIT_INCOMPLETE = 3

#: Errors that mean "the user must fix something": shown as one line, no traceback.
USER_ERRORS = (ConfigError, RunnerError, DatasetUnavailable, ItemError, FileNotFoundError, RunLocked)


class RunIncomplete(Exception):
    """The run wrote its outputs but some planned trials are missing; carries the run folder."""

    def __init__(self, run_dir: Path, message: str) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def in_multirun() -> bool:
    """True inside a job of a Hydra sweep (`-m`), where a job must not exit the process."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def run_app(action: Callable[[], Path], log: logging.Logger) -> Path:
    """Run an app's main action; print its run folder, or the error and exit with code 2 (3 if incomplete).

    Inside a sweep the error is re-raised instead, for `facet_probe.sweep.SweepStatus` to record."""
    started = time.perf_counter()
    try:
        run_dir = action()
    except USER_ERRORS as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        if in_multirun():  # facet_probe.sweep records the job's failure; exiting would end the sweep
            raise
        sys.exit(EXIT_USER_ERROR)
    except RunIncomplete as exc:
        log.warning("%s", exc)
        print(f"incomplete: {exc}", file=sys.stderr)
        print(f"run folder: {exc.run_dir}  ({time.perf_counter() - started:.1f}s)")
        if in_multirun():
            raise
        sys.exit(EXIT_INCOMPLETE)
    print(f"run folder: {run_dir}  ({time.perf_counter() - started:.1f}s)")
    return run_dir
