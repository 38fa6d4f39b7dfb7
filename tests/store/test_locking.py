"""One writer per trials file: a held lock stops a second process with the holder's name, a crashed holder's
lock is taken over, `wait` waits; two real audits on one folder pay every call once."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from facet_probe.app.boundary import USER_ERRORS
from facet_probe.store.locking import FileLock, RunLocked, lock_path
from facet_probe.store.trial_store import TrialStore
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lock(path: Path, **holder) -> None:
    base = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": "2026-01-01T00:00:00+00:00",
            "command": "python -m facet_probe"}
    lock_path(path).write_text(json.dumps({**base, **holder}))


def test_a_held_lock_names_its_holder_and_says_what_to_do(tmp_path):
    target = tmp_path / "trials.jsonl"
    with FileLock(target) as held:
        assert held.held and lock_path(target).is_file()
        holder = json.loads(lock_path(target).read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(RunLocked) as err:
            FileLock(target).acquire()
        text = str(err.value)
        assert f"pid {os.getpid()} on {socket.gethostname()} since {holder['started_at']}" in text
        assert "store.wait_for_lock=true" in text and str(lock_path(target)) in text
    assert not lock_path(target).exists()
    assert isinstance(RunLocked("x"), USER_ERRORS)  # the apps print one line and exit 2
    with FileLock(target), pytest.raises(RunLocked) as err:
        FileLock(target, wait_option=None).acquire()
    assert "wait_for_lock" not in str(err.value) and "Wait for it to finish;" in str(err.value)


def test_a_stale_lock_of_a_gone_process_is_taken_over_with_a_warning(tmp_path, caplog):
    target = tmp_path / "trials.jsonl"
    write_lock(target, pid=dead_pid())
    with caplog.at_level(logging.WARNING), FileLock(target):
        assert json.loads(lock_path(target).read_text())["pid"] == os.getpid()
    assert "stale lock" in caplog.text


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    target = tmp_path / "trials.jsonl"
    code = "import sys, time; from facet_probe.store.locking import FileLock; FileLock(sys.argv[1]).acquire(); " \
           "print('held', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(RunLocked, match=f"pid {proc.pid} "):
        FileLock(target).acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with FileLock(target):
        assert json.loads(lock_path(target).read_text())["pid"] == os.getpid()


def test_a_live_pid_without_the_flock_is_a_recycled_pid_on_this_host(tmp_path):
    """The pid in the file is alive (ours) but nobody holds the flock: the holder crashed, its pid was reused."""
    target = tmp_path / "trials.jsonl"
    write_lock(target, pid=os.getpid())
    with FileLock(target):
        pass


def test_a_lock_of_another_host_is_never_taken_over(tmp_path):
    target = tmp_path / "trials.jsonl"
    write_lock(target, host="node-17.cluster", pid=dead_pid())
    with pytest.raises(RunLocked, match="on node-17.cluster since 2026-01-01"):
        FileLock(target).acquire()


def test_wait_polls_until_the_holder_releases(tmp_path):
    target = tmp_path / "trials.jsonl"
    first = FileLock(target).acquire()
    threading.Timer(0.5, first.release).start()
    started = time.monotonic()
    with FileLock(target, wait=True, poll_s=0.05):
        assert time.monotonic() - started >= 0.4
    with FileLock(target), pytest.raises(RunLocked, match="gave up"):
        FileLock(target, wait=True, poll_s=0.05, timeout_s=0.2).acquire()


def test_two_trial_stores_on_one_file(tmp_path):
    path = tmp_path / "trials.jsonl"
    with TrialStore(path):
        with pytest.raises(RunLocked, match="is being written by another process"):
            TrialStore(path)
        with TrialStore(tmp_path / "trials.shard-1-of-2.jsonl"):  # shards of one folder run side by side
            pass
    with TrialStore(path):  # released on close
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trials.jsonl", "trials.shard-1-of-2.jsonl"]


ARGS = ["model=seeded_random", "+model.latency_s=0.1", "facet=option_order", "dataset=synthetic_mcq", "limit=10",
        "progress=false"]


def audit_cmd(run: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "facet_probe", f"hydra.run.dir={run}", *ARGS, *extra]


def start_first_audit(run: Path) -> tuple[subprocess.Popen, Path, dict]:
    """The first audit on `run`, once it has stored a few trials (so it holds the lock): (process, trials, env)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(audit_cmd(run), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    trials = run / "trials.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (trials.exists() and trials.read_bytes().count(b"\n") >= 5):
        time.sleep(0.05)
    return first, trials, env


@pytest.mark.slow
def test_a_second_audit_on_one_folder_exits_2_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    first, trials, env = start_first_audit(run)
    second = run_module(*audit_cmd(run)[2:], cwd=ROOT)  # the second one in this process: two processes all the same
    still_running = first.poll() is None
    assert first.wait(timeout=300) == 0
    assert still_running, "the first audit must still hold the lock when the second starts"
    assert second.returncode == 2, second.stderr[-3000:]
    assert f"pid {first.pid} on {socket.gethostname()}" in second.stderr
    assert "Traceback" not in second.stderr
    keys = [json.loads(line)["trial_key"] for line in trials.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 60  # 10 items x 6 orderings, each once
    assert not lock_path(trials).exists()


@pytest.mark.slow
def test_with_wait_for_lock_the_second_audit_waits_and_calls_nothing_again(tmp_path):
    run = tmp_path / "run"
    first, trials, env = start_first_audit(run)
    second = run_module(*audit_cmd(run, "store.wait_for_lock=true")[2:], cwd=ROOT)  # in this process, as above
    assert first.wait(timeout=300) == 0
    assert second.returncode == 0, second.stderr[-3000:]
    assert "waiting for it to finish" in second.stderr + second.stdout + (run / "audit.log").read_text()
    keys = [json.loads(line)["trial_key"] for line in trials.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 60


CLAIMANT = """
import sys, time
from facet_probe.store.locking import KeyClaims
claims = KeyClaims(sys.argv[1])
print(sorted(claims.claim(sys.argv[2:])), flush=True)
time.sleep(60)
"""


def test_a_claim_binds_while_its_owner_lives_and_is_taken_over_once_it_is_killed(tmp_path):
    """Claims of a live process (another process, or another owner here) bind; kill -9 frees them (the owner
    lock's flock goes with the process), and a released claim is free at once."""
    from facet_probe.store.locking import KeyClaims

    folder = tmp_path / "claims"
    child = subprocess.Popen([sys.executable, "-c", CLAIMANT, str(folder), "k1", "k2"], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "['k1', 'k2']"
        here, other = KeyClaims(folder), KeyClaims(folder)
        assert here.claim(["k1", "k2", "k3"]) == {"k3"}
        assert here.free(["k1", "k2"]) == [] and other.claim(["k3"]) == set()
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert sorted(here.free(["k1", "k2", "k3"])) == ["k1", "k2"]  # k3 is this owner's own
        assert other.claim(["k1"]) == {"k1"} and here.claim(["k1", "k2"]) == {"k2"}  # one taker each
        other.release(["k1"])
        assert here.claim(["k1"]) == {"k1"}
        here.close()
        other.close()
        assert sorted(p.name for p in folder.iterdir()) == ["owners"] and not list((folder / "owners").iterdir())
    finally:
        child.kill()
        child.wait()
