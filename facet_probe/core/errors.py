"""The errors every stage may raise and the exit codes the apps turn them into (here, not beside the code that
raises them, so that the apps' error boundary imports none of that code: `--help` stays light).

Exit codes (documented in the README):
    0  the run is complete
    2  a user error (bad config, input or data): one line says what, where and what to do
    3  the run finished but is incomplete (trials missing after retries); re-run the same command
    130  stopped by Ctrl-C (128 + SIGINT, as a shell reports it): one line says what is stored; re-run to resume
    other  a crash (a bug): the traceback is shown
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

EXIT_USER_ERROR = 2
EXIT_INCOMPLETE = 3
EXIT_INTERRUPTED = 130


class ConfigError(ValueError):
    """A config names something that does not exist or cannot work together; says what is valid."""


class ItemError(ValueError):
    """An item (or a file of items) is malformed; the message says which item and what to fix."""


class DatasetUnavailable(FileNotFoundError):
    """The data is not on disk (and cannot be fetched): the message says what to fetch and where."""


class RunnerError(RuntimeError):
    """A runner cannot start (missing key, missing weights, missing GPU extra): says what to do."""


class TrialsFileError(ValueError):
    """A stored file of a run cannot be read (a trials file's damaged line, no trials, not trial records; a run
    folder's damaged record of its settings, status, manifest or items): says which file and line, and what to do."""


class RunIncomplete(Exception):
    """The run wrote its outputs but some planned trials are missing; carries the run folder."""

    def __init__(self, run_dir: Path, message: str) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def parse_enum(kind: type[Enum], value: Any, what: str) -> Enum:
    """`value` (a member or its value) as a member of `kind`, or one ConfigError listing the choices."""
    try:
        return kind(value.value if isinstance(value, Enum) else value)
    except ValueError:
        raise ConfigError(f"{what} must be one of {', '.join(m.value for m in kind)}; got {value!r}") from None
