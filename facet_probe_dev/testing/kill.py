"""Kill -9 an app mid-run, for the resume tests: start it, wait until its stored progress reaches a target,
then SIGKILL it (what a pre-empted job or a power cut does)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def kill_when(cmd: Sequence[str], progress: Callable[[], int], target: int, *, cwd: Path, env: dict,
              timeout_s: float = 300) -> int:
    """Run `cmd` until `progress()` reaches `target`, then SIGKILL it; return the progress at the kill.
    Fails (AssertionError) when the command ends first: the kill must land mid-run."""
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout_s
    while time.time() < deadline and progress() < target and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the kill must land mid-run"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return progress()
