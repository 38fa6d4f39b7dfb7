"""Ctrl-C held across a block that must finish or be seen to stop: the trial store's write of a group (written and
noted, or neither) and an ODI fit (a sampler swallows Ctrl-C and returns the draws so far)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_held(forward: bool = False) -> Iterator[None]:
    """A Ctrl-C pressed during the block is raised as KeyboardInterrupt once the block ends. `forward`: the handler
    before also runs at the press (a sampler's own stop, which then swallows the exception). Only the main thread
    receives SIGINT; a handler Python does not run (ignored, default) is left as it is. Written here: the standard
    library has no way to hold a signal across a block."""
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []

    def press(signum, frame) -> None:
        pressed.append(signum)
        if forward:
            previous(signum, frame)

    signal.signal(signal.SIGINT, press)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt
