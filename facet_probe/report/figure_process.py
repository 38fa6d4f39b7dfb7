"""A report's figures: what they are drawn from (`ReportFigures`), drawn here or, for a large report, in a helper
process while the report writes its tables.

Matplotlib lays out and renders every label in Python, holding the GIL: at 400k trials the three figures took
about 1.9 s of a 6.5 s report, and the tables as long again. The helper is this module run as a process, started
before the report reads its trials (where the inputs look large: `store.reading.trial_count_hint`) so that its
imports (about a second of CPU) overlap the read. It reads
pickled `ReportFigures` jobs and their folder on stdin (the accuracy across orderings first, as it needs only the
trials; the summary's figures once the metrics are done), draws each in turn, and exits when the report closes the
pipe. Only reports of at least `HELPER_MIN_TRIALS` trials use one; smaller reports draw in their own process,
where a helper's start would cost more than it saves. (A `multiprocessing` pool was not used: its spawned child
imports the caller's `__main__`, which runs a user's unguarded script a second time.)

A helper that fails to start or dies (killed, out of memory, a figure that fails to draw) is replaced by drawing in
the report's process: the figures are never missing, and a figure that cannot be drawn fails there, as it would
without a helper. A report killed before it handed over the figures closes the helper's stdin, and the
helper exits without drawing; one killed later leaves the helper no figure to start (it checks its parent).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import logging
import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

import pandas as pd

log = logging.getLogger(__name__)

#: From this many trials a report draws its figures in a helper process. The figures cost the same at any size (one
#: bar a cell) and the tables grow with the trials, so a helper pays only where the tables take as long as the
#: figures: measured 2026-12-05 with the helper started at the report's first write, 60k trials 5.4 s with one
#: against 4.6-4.8 s without, 400k 6.1-6.4 s against 7.7 s; started before the read (a1369fb), 100k 4.70-4.74 s
#: and 331-334 MB with one against 4.79-4.80 s and 357-359 MB without (docs/scale-out.md).
#: Since the helper skips Python's teardown (2026-12-05, alternating, four runs each): 99,792 trials 3.86-4.12 s and
#: 274-278 MB with it against 4.09-4.36 s and 332-335 MB without; 40,176 trials 4.69-4.84 s and 315 MB against
#: 4.68-5.01 s and 353-355 MB. Hence 50,000.
HELPER_MIN_TRIALS = 50_000
#: The PNG text chunk holding what a report figure was drawn from (`drawn_from`).
INPUTS_KEY = "facet_probe drawn from"
#: Each report figure's file, the `ReportFigures` frame it is drawn from and its drawing function in `report.figures`.
FIGURES = {"flip_rate_per_cell.png": ("summary", "flip_rate_figure"),
           "accuracy_vs_flip.png": ("summary", "accuracy_vs_flip_figure"),
           "accuracy_per_ordering.png": ("ordering", "accuracy_per_ordering_figure")}


@dataclass(frozen=True)
class ReportFigures:
    """What a report's three figures are drawn from: its summary (one row per cell; the flip-rate bars and the
    accuracy-vs-flip scatter) and `metrics.flips.ordering_accuracy` (per cell the worst, expected and best
    ordering's accuracy). Either may come alone: the ordering's figure needs only the trials, so a report hands it
    over before its metrics. Small frames, so they can be drawn in another process."""

    summary: pd.DataFrame | None = None
    ordering: pd.DataFrame | None = None

    NAMES = tuple(FIGURES)

    def paths(self, folder: Path) -> list[Path]:
        """Where the figures drawn from what is here go, in `NAMES`' order."""
        return [folder / name for name, (frame, _) in FIGURES.items() if getattr(self, frame) is not None]

    def draw(self, folder: Path, still_wanted: Callable[[], bool] = lambda: True) -> list[Path]:
        """Write every figure into `folder` (atomically, one by one) while `still_wanted()`, drawing only those whose
        PNG there was drawn from other inputs; returns the paths of the figures in place."""
        written = []
        for path in self.paths(folder):
            if not still_wanted():
                break
            frame = getattr(self, FIGURES[path.name][0])
            key = drawn_from(path.name, frame)
            if not is_current(path, key):
                _draw(path, frame, key)
            written.append(path)
        return written


def _draw(path: Path, frame: pd.DataFrame, key: str | None) -> Path:
    # imported here, where a figure is drawn: a report whose helper draws, or whose figures are current, never
    # loads matplotlib (0.4 s)
    from facet_probe.report import figures

    draw = getattr(figures, FIGURES[path.name][1])
    return figures.save(draw(frame), path, metadata={INPUTS_KEY: key} if key else None)


def drawn_from(name: str, frame: pd.DataFrame) -> str | None:
    """A digest of what figure `name` shows: its frame's values, columns and types, the drawing code and matplotlib's
    version (None for a frame pandas cannot hash: that figure is always drawn)."""
    try:
        values = pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()
    except TypeError:  # a list or dict in a cell
        return None
    digest = hashlib.sha256(_drawing_code())
    digest.update(repr((name, [str(c) for c in frame.columns], [str(t) for t in frame.dtypes])).encode())
    digest.update(values)
    return digest.hexdigest()


@functools.cache
def _drawing_code() -> bytes:
    """The drawing code (the figures' module and this one, which picks a figure's function) and matplotlib's
    version, read without importing matplotlib."""
    source = Path(__file__).with_name("figures.py").read_bytes()
    return source + Path(__file__).read_bytes() + importlib.metadata.version("matplotlib").encode()


def is_current(path: Path, key: str | None) -> bool:
    """Whether the PNG at `path` records `key` as what it was drawn from."""
    if key is None or not path.is_file():
        return False
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415  (matplotlib's own dependency; only here)

    try:
        with Image.open(path) as image:  # reads the chunks before the pixels, not the pixels
            return image.info.get(INPUTS_KEY) == key
    except (OSError, UnidentifiedImageError, ValueError):  # a damaged PNG is drawn again
        return False


class FigureDrawer:
    """Draws a report's figures here or, with `helper`, in a process started now (its start and imports overlap
    the caller's work). Use as a context manager; `draw` hands over one part of the figures at a time (the helper
    draws them in turn), and `wait` returns once all are written."""

    def __init__(self, helper: bool):
        self._errors = tempfile.TemporaryFile() if helper else None  # noqa: SIM115 - its stderr; closed on exit
        self._helper = _start_helper(self._errors) if self._errors is not None else None
        self._jobs: list[tuple[ReportFigures, Path]] = []  # handed to the helper

    @property
    def helper(self) -> subprocess.Popen | None:
        """The helper process, if one was started."""
        return self._helper

    def draw(self, figures: ReportFigures, folder: Path) -> list[Path]:
        """Start drawing `figures` into `folder` (at once, here, without a helper); returns the paths they get."""
        if self._helper is None or not _send(self._helper, figures, folder):
            figures.draw(folder)
        else:
            self._jobs.append((figures, folder))
        return figures.paths(folder)

    def wait(self) -> None:
        """Block until the figures are written; what a helper did not draw is drawn here."""
        if not self._jobs or self._helper is None or self._errors is None:
            return
        jobs, self._jobs = self._jobs, []
        self._close_pipe()  # a dead helper's pipe: its exit status says so below
        if self._helper.wait() != 0:
            self._errors.seek(0)
            why = self._errors.read().decode(errors="replace").strip().splitlines()[-1:]
            log.debug("the figures' helper process ended with %s (%s); drawing them here", self._helper.returncode,
                      why)
            for figures, folder in jobs:
                figures.draw(folder)

    def __enter__(self) -> FigureDrawer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._helper is not None and self._helper.poll() is None:  # a report that failed or drew nothing
            self._helper.kill()
            self._helper.wait()
        self._close_pipe()
        if self._errors is not None:
            self._errors.close()

    def _close_pipe(self) -> None:
        """No further job: the helper exits once it has drawn what it was handed."""
        if self._helper is not None and self._helper.stdin is not None:
            with contextlib.suppress(OSError):
                self._helper.stdin.close()


def _start_helper(errors: IO[bytes]) -> subprocess.Popen | None:
    try:
        return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=errors)
    except OSError as exc:  # no process to spare: draw here
        log.debug("no helper process for the figures (%s); drawing them here", exc)
        return None


def _send(helper: subprocess.Popen, figures: ReportFigures, folder: Path) -> bool:
    """Hand the helper a job (it reads its pipe while it draws, so this never waits for a drawing); False where
    it has died already (a closed pipe)."""
    if helper.stdin is None:  # started without a pipe
        return False
    try:
        pickle.dump((figures, Path(folder).resolve(), os.getpid()), helper.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        helper.stdin.flush()
    except (BrokenPipeError, OSError):
        return False
    return True


def main() -> None:
    """The helper: draw each job read from stdin, in turn, until the report closes it. A report that dies meanwhile
    gets no further figure (another report of the folder may be writing its own by then). It imports the drawing
    code (matplotlib) first, while its report is still reading, computing or waiting on a run's calls."""
    import facet_probe.report.figures  # noqa: F401

    jobs: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_read_jobs, args=(sys.stdin.buffer, jobs), daemon=True).start()
    while (job := jobs.get()) is not None:
        figures, folder, report = job  # the report's pid: it may have died already
        figures.draw(folder, still_wanted=lambda report=report: os.getppid() == report)


def _read_jobs(pipe: IO[bytes], jobs: queue.SimpleQueue) -> None:
    """Every job on the pipe onto `jobs`, then None (the pipe closed): read beside the drawing, so the report's
    write of a job never waits for a figure."""
    try:
        while True:
            jobs.put(pickle.load(pipe))
    except EOFError:
        pass
    finally:
        jobs.put(None)


if __name__ == "__main__":
    main()
    # Every figure is written and closed (atomically): the report waits for this process's exit, so skip Python's
    # teardown of matplotlib and pandas (about 0.2 s at the end of a large report's critical path).
    sys.stderr.flush()
    os._exit(0)
