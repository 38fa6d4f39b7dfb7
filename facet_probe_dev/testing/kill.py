"""Kill -9 an app mid-run, for the resume tests: start it, wait until its stored progress reaches a target (or
until it prints a line, then a while), then SIGKILL it (what a pre-empted job or a power cut does)."""

from __future__ import annotations

import signal
import subprocess
import threading
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


def kill_after_line(cmd: Sequence[str], marker: str, delay_s: float, *, cwd: Path, env: dict,
                    timeout_s: float = 300) -> list[str]:
    """Run `cmd`, SIGKILL it `delay_s` seconds after it prints a line holding `marker` (stdout and stderr);
    return the lines it printed. Fails (AssertionError) when it ends first: the kill must land mid-run."""
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[str] = []
    seen = threading.Event()

    def drain() -> None:  # read on while it runs: a full pipe would stall the app, not the clock
        for line in proc.stdout:
            lines.append(line)
            if marker in line:
                seen.set()
        seen.set()  # it ended (or closed its output) without the marker: let the check below say so

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    seen.wait(timeout_s)
    time.sleep(delay_s)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(10)
    proc.stdout.close()
    assert any(marker in line for line in lines), f"never printed {marker!r}:\n{''.join(lines)[-3000:]}"
    assert alive, f"the kill must land mid-run ({delay_s:.2f} s after {marker!r})"
    return lines
