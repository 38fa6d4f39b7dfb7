"""What the command-line apps share: user errors become one clear line and exit code 2."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

from facet_probe.config_loading import ConfigError
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.items import ItemError
from facet_probe.runners.base import RunnerError

#: Errors that mean "the user must fix something": shown as one line, no traceback.
USER_ERRORS = (ConfigError, RunnerError, DatasetUnavailable, ItemError, FileNotFoundError)


def run_app(action: Callable[[], Path], log: logging.Logger) -> Path:
    """Run an app's main action; print its run folder, or the user error and exit with code 2."""
    started = time.perf_counter()
    try:
        run_dir = action()
    except USER_ERRORS as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"run folder: {run_dir}  ({time.perf_counter() - started:.1f}s)")
    return run_dir
