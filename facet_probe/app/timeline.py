"""How long a run spent before its first model call and after its last answer: the app's own start-up and wrap-up
(imports, config, plan; store, report, figures), said in the closing log line beside the calls themselves.

The clock of a command line's first run starts when the process started (Linux's /proc, else when this module was
imported); a sweep's later jobs and a Python API call start theirs when they begin. Times are `time.monotonic()`."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

_IMPORTED = time.monotonic()


def process_started() -> float:
    """When this process started, on the `time.monotonic()` clock (to 10 ms, from /proc/self/stat on Linux);
    where /proc is not there, when this module was imported (the interpreter's own start-up not counted)."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()  # after the command's name, which may hold spaces
        ticks_after_boot = int(fields[19])  # field 22 of proc(5), `starttime`
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks_after_boot / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    return time.monotonic() - max(0.0, age)


#: Where the command line's first run starts its clock (`from_process_start`), taken by that run's `Timeline`.
_ORIGIN: list[float] = []


def from_process_start() -> None:
    """Time the process's first run from the process's start (an app's command line calls this first)."""
    _ORIGIN[:] = [process_started()]


def _start() -> float:
    return _ORIGIN.pop() if _ORIGIN else time.monotonic()


@dataclass
class Timeline:
    """A run's start, its first model call and its last answer (None until they happen)."""

    started: float = field(default_factory=_start)
    first_call: float | None = None
    last_answer: float | None = None

    def calls(self, first_call: float | None, last_answer: float | None) -> None:
        """Take in one model's first call and last answer (a panel's models run in turn)."""
        if first_call is not None:
            self.first_call = first_call if self.first_call is None else min(self.first_call, first_call)
        if last_answer is not None:
            self.last_answer = last_answer if self.last_answer is None else max(self.last_answer, last_answer)

    def line(self, now: float | None = None) -> str:
        """'first call after 2.1 s, 0.8 s after the last answer (12.4 s in all)', or, with no call made (every
        trial stored already), 'no call made (3.0 s in all)'."""
        now = time.monotonic() if now is None else now
        total = f"{now - self.started:.1f} s in all"
        if self.first_call is None:
            return f"no call made ({total})"
        after = f"{now - self.last_answer:.1f} s after the last answer" if self.last_answer is not None else "no answer"
        return f"first call after {self.first_call - self.started:.1f} s, {after} ({total})"
