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

import difflib
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

EnumT = TypeVar("EnumT", bound=Enum)

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


class RunFolderError(TrialsFileError):
    """A run folder's record is damaged (its status, identity, manifest, items or config: not JSON, not the shape
    its writer writes, unreadable): names the file (and line) and what to do (`store.run_folder`)."""


class RunIncomplete(Exception):
    """The run wrote its outputs but some planned trials are missing; carries the run folder."""

    def __init__(self, run_dir: Path, message: str) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def parse_enum(kind: type[EnumT], value: Any, what: str) -> EnumT:
    """`value` (a member or its value) as a member of `kind`, or one ConfigError listing the choices."""
    try:
        return kind(value.value if isinstance(value, Enum) else value)
    except ValueError:
        choices = [str(m.value) for m in kind]
        hint = did_you_mean(str(value), choices, f"{what}=")
        raise ConfigError(f"{what} must be one of {', '.join(choices)}; got {value!r}"
                          + (f"; {hint}" if hint else "")) from None


def did_you_mean(word: str, options: list[str], prefix: str = "") -> str:
    """"did you mean 'x'?" (or 'x' or 'y') for the options closest to a misspelt `word`, each written after
    `prefix`; "" when none is close."""
    close = difflib.get_close_matches(word, options, n=3, cutoff=0.65)
    best = difflib.SequenceMatcher(None, word, close[0]).ratio() if close else 0.0
    close = [c for c in close if difflib.SequenceMatcher(None, word, c).ratio() >= best - 0.05]  # the nearest only
    return f"did you mean {' or '.join(repr(prefix + c) for c in close)}?" if close else ""
