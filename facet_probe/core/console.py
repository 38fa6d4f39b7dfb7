"""What the user sees on the terminal: one line per message, secrets masked, and every traceback only when
asked for (`HYDRA_FULL_ERROR=1`)."""

from __future__ import annotations

import logging
import os
import sys

from facet_probe.core.redact import redact_text


def say(log: logging.Logger, level: int, message: str, prefix: str = "") -> None:
    """`<prefix><message>` once on the terminal (stderr), and `message` in the run's log file: logged through
    the console handler as well, every such line would print twice."""
    print(f"{prefix}{redact_text(message)}", file=sys.stderr)
    record = log.makeRecord(log.name, level, __file__, 0, "%s", (message,), None)
    for handler in log_file_handlers(log):
        if record.levelno >= handler.level:
            handler.handle(record)


#: The loggers whose INFO lines are the run's own: the project's, and Hydra's (a sweep's `#1 : <overrides>`).
OWN_LOGGERS = ("facet_probe", "hydra")


def quiet_libraries() -> None:
    """Only the project's (and Hydra's) INFO lines reach the terminal and the app's log; a library's (httpx2's
    `HTTP Request: POST ...` once per API call, the SDKs', PyMC's) from WARNING up. Acts where Hydra's job logging
    left the root logger at INFO, i.e. nothing was asked for: `hydra.verbose=true` (root at DEBUG) keeps every
    line, `hydra.verbose=[httpx2,openai]` sets those loggers to DEBUG, which this leaves as they are."""
    root = logging.getLogger()
    if root.level != logging.INFO:
        return
    for name in OWN_LOGGERS:
        own = logging.getLogger(name)
        if own.level == logging.NOTSET:
            own.setLevel(logging.INFO)
    root.setLevel(logging.WARNING)


def log_file_handlers(log: logging.Logger) -> list[logging.FileHandler]:
    """The file handlers a record of `log` reaches (its own and its ancestors', as propagation goes)."""
    found: list[logging.FileHandler] = []
    node: logging.Logger | None = log
    while node is not None:
        found += [h for h in node.handlers if isinstance(h, logging.FileHandler) and h not in found]
        node = node.parent if node.propagate else None
    return found


def full_errors() -> bool:
    """Did the user ask for every traceback (`HYDRA_FULL_ERROR=1`)?"""
    return os.environ.get("FACET_PROBE_USER_FULL_ERROR", os.environ.get("HYDRA_FULL_ERROR", "")) == "1"
