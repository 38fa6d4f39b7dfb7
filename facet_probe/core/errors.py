"""The errors every stage may raise and the exit codes the apps turn them into.

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
