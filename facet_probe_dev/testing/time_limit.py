"""A time limit for a test of a check that once looped for ever: a failure, not a hung suite, if the loop comes back."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def time_limit(seconds: int, what: str) -> Iterator[None]:
    """Raise TimeoutError naming `what` if the block runs past `seconds` (SIGALRM: Unix, the main thread)."""
    def expired(*_) -> None:
        raise TimeoutError(f"{what}: still running after {seconds} s")

    before = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
