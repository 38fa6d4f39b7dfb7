"""Kill -9 an app mid-run, for the resume tests: start it, wait until its stored progress reaches a target (or
until it prints a line, then a while), then SIGKILL it (what a pre-empted job or a power cut does). With
`FACET_PROBE_KILL_TALLY=<file>` set, each kill adds a line `<app> <test>` to that file, so a run of the kill
tests counts its kill moments per app (docs/architecture.md, "Tests")."""

from __future__ import annotations

import os
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
    tally(cmd)
    return progress()


def tally(cmd: Sequence[str]) -> None:
    """Count one kill of `cmd`'s app (`python -m <app>`) in `$FACET_PROBE_KILL_TALLY`, when that is set."""
    if path := os.environ.get("FACET_PROBE_KILL_TALLY"):
        cmd = list(cmd)
        app = cmd[cmd.index("-m") + 1] if "-m" in cmd else Path(cmd[0]).name
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        with open(path, "a") as fh:
            fh.write(f"{app} {test}\n")


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
    tally(cmd)
    return lines
