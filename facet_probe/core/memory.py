"""Giving freed memory back to the system between the phases of a large job.

glibc keeps the heap pages that pandas' temporaries freed: after a 400k-trial report's metrics about 60 MB that
the process no longer uses, on top of which the next phase allocates its own. `release()` asks glibc to return
them (`malloc_trim`, as Dask's workers do); where there is no glibc (macOS, musl) it does nothing. A call costs a
few milliseconds. (Setting glibc's trim or mmap threshold for the whole process did as well for the peak but
doubled the report's system time: docs/scale-out.md.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)


#: Below this many rows a job's temporaries are a few MB: not worth a walk over the heap (in a process holding
#: torch and PyMC, as a test worker does, a walk costs tens of milliseconds).
WORTH_RELEASING_ROWS = 50_000


def release(rows: int | None = None) -> None:
    """Return the heap pages freed so far to the system (glibc); nothing elsewhere, nor after a job of `rows`
    rows below WORTH_RELEASING_ROWS."""
    if rows is not None and rows < WORTH_RELEASING_ROWS:
        return
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
