"""A large report's figures drawn in a helper process while the report writes its tables.

Matplotlib lays out and renders every label in Python, holding the GIL: at 400k trials the three figures took
about 1.9 s of a 6.5 s report, and the tables as long again. The helper is `python -m facet_probe.report.figure_process`,
started as soon as the report knows its size so that its imports (about a second of CPU) overlap the metrics; it
reads one pickled `ReportFigures` and a folder on stdin, draws, and exits. Only reports of at least
`HELPER_MIN_TRIALS` trials use one; smaller reports draw in their own process, where a helper's start would cost
more than it saves. (A `multiprocessing` pool was not
used: its spawned child imports the caller's `__main__`, which runs a user's unguarded script a second time.)

A helper that fails to start or dies (killed, out of memory, a figure that fails to draw) is replaced by drawing in
the report's process: the figures are never missing, and a figure that cannot be drawn fails there, as it would
without a helper. A report killed before it handed over the figures closes the helper's stdin, and the
helper exits without drawing; one killed later leaves the helper no figure to start (it checks its parent).
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import IO

from facet_probe.report.figures import ReportFigures

log = logging.getLogger(__name__)

#: From this many trials a report draws its figures in a helper process. The figures cost the same at any size (one
#: bar a cell) and the tables grow with the trials, so a helper pays only where the tables take as long as the
#: figures: measured 2026-12-05, 60k trials 5.4 s with one against 4.6-4.8 s without, 100k 5.0-5.3 s against 5.1 s,
#: 400k 6.1-6.4 s against 7.7 s (docs/scale-out.md).
HELPER_MIN_TRIALS = 150_000


class FigureDrawer:
    """Draws a report's figures here or, with `helper`, in a process started now (its start and imports overlap
    the caller's work). Use as a context manager; `wait` returns once the figures are written."""

    def __init__(self, helper: bool):
        self._errors = tempfile.TemporaryFile() if helper else None  # noqa: SIM115 - its stderr; closed on exit
        self._helper = _start_helper(self._errors) if helper else None
        self._job: tuple[ReportFigures, Path] | None = None

    @property
    def helper(self) -> subprocess.Popen | None:
        """The helper process, if one was started."""
        return self._helper

    def draw(self, figures: ReportFigures, folder: Path) -> list[Path]:
        """Start drawing `figures` into `folder` (at once, here, without a helper); returns the paths they get."""
        if self._helper is None or not _send(self._helper, figures, folder):
            figures.draw(folder)
        else:
            self._job = (figures, folder)
        return figures.paths(folder)

    def wait(self) -> None:
        """Block until the figures are written; what a helper did not draw is drawn here."""
        if self._job is None or self._helper is None:
            return
        figures, folder = self._job
        self._job = None
        if self._helper.wait() != 0:
            self._errors.seek(0)
            why = self._errors.read().decode(errors="replace").strip().splitlines()[-1:]
            log.debug("the figures' helper process ended with %s (%s); drawing them here", self._helper.returncode,
                      why)
            figures.draw(folder)

    def __enter__(self) -> FigureDrawer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._helper is not None and self._helper.poll() is None:  # a report that failed or drew nothing
            self._helper.kill()
            self._helper.wait()
        if self._errors is not None:
            self._errors.close()


def _start_helper(errors: IO[bytes]) -> subprocess.Popen | None:
    try:
        return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=errors)
    except OSError as exc:  # no process to spare: draw here
        log.debug("no helper process for the figures (%s); drawing them here", exc)
        return None


def _send(helper: subprocess.Popen, figures: ReportFigures, folder: Path) -> bool:
    """Hand the helper its job; False where it has died already (a closed pipe)."""
    try:
        pickle.dump((figures, Path(folder).resolve(), os.getpid()), helper.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        helper.stdin.close()
    except (BrokenPipeError, OSError):
        return False
    return True


def main() -> None:
    """The helper: draw the one job read from stdin; a closed stdin (the report ended) draws nothing, and a report
    that dies meanwhile gets no further figure (another report of the folder may be writing its own by then)."""
    try:
        figures, folder, report = pickle.load(sys.stdin.buffer)  # the report's pid: it may have died already
    except EOFError:
        return
    figures.draw(folder, still_wanted=lambda: os.getppid() == report)


if __name__ == "__main__":
    main()
