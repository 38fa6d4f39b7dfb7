"""The trial store persists every trial at once, survives torn writes, and never duplicates."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from facet_probe.core.trials import Trial
from facet_probe.store.reading import load_trial_frame
from facet_probe.store.run_folder import RunFolder
from facet_probe.store.trial_store import (
    PER_TRIAL,
    Commit,
    Durability,
    TrialStore,
    commit_policy,
    merge_trial_files,
    repair_torn_tail,
)
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_module
from facet_probe_dev.testing.kill import kill_when
from tests.e2e.test_bad_input import app_says, openai_compat


def trial(key: str, call: str = "", error: str | None = None, answer: str = "A") -> Trial:
    return Trial(trial_key=key, call_key=call or f"c-{key}", model="m", facet="option_order", dataset="d",
                 item_id="d::1", ordering_idx=0, repeat_idx=0, permutation=[0, 1], component_ids=["a", "b"],
                 prompt_hash="h", mode="direct", raw_output=f"Answer: {answer}", answer_normalized=answer,
                 parse_status="ok", error=error)


def test_appended_trials_are_on_disk_before_close(tmp_path):
    store = TrialStore(tmp_path / "trials.jsonl")
    store.append(trial("t1"))
    lines = (tmp_path / "trials.jsonl").read_text().splitlines()
    assert [json.loads(line)["trial_key"] for line in lines] == ["t1"]
    store.close()


def test_reopening_resumes_done_trials_but_retries_errors(tmp_path):
    with TrialStore(tmp_path / "trials.jsonl") as store:
        store.append(trial("ok"))
        store.append(trial("failed", error="HTTP 500"))
    with TrialStore(tmp_path / "trials.jsonl") as store:
        assert store.done("ok")
        assert not store.done("failed")
        assert store.cached_call("c-failed") is None


def test_torn_last_line_is_cut_and_kept_aside(tmp_path):
    path = tmp_path / "trials.jsonl"
    with TrialStore(path) as store:
        store.append(trial("t1"))
        store.append(trial("t2"))
    with path.open("a") as fh:
        fh.write('{"trial_key": "t3", "raw_out')  # a crash mid-write
    removed = repair_torn_tail(path)
    assert removed > 0
    assert path.read_text().endswith("\n")
    assert (tmp_path / "trials.jsonl.torn").read_text().startswith('{"trial_key": "t3"')
    with TrialStore(path) as store:
        assert store.done("t1") and store.done("t2") and not store.done("t3")
        store.append(trial("t3"))
    assert len(path.read_text().splitlines()) == 3


def test_identical_calls_are_served_from_the_run_and_from_the_shared_cache(tmp_path):
    cache = tmp_path / "cache"
    with TrialStore(tmp_path / "run1" / "trials.jsonl", cache_path=cache) as store:
        store.append(trial("t1", call="same-call", answer="B"))
        assert store.cached_call("same-call")["raw_output"] == "Answer: B"
    with TrialStore(tmp_path / "run2" / "trials.jsonl", cache_path=cache) as other_run:
        assert not other_run.done("t1")
        assert other_run.cached_call("same-call")["raw_output"] == "Answer: B"


def test_shards_merge_without_duplicates(tmp_path):
    a, b = RunFolder(tmp_path).trials_file("0/2"), RunFolder(tmp_path).trials_file("1/2")
    assert a.name == "trials.shard-0-of-2.jsonl"
    with TrialStore(a) as s:
        s.append(trial("t1"))
        s.append(trial("t2", error="timeout"))
    with TrialStore(b) as s:
        s.append(trial("t2"))
        s.append(trial("t1"))  # the same trial written twice (e.g. a re-run shard)
    n = merge_trial_files([a, b], tmp_path / "trials.jsonl")
    assert n == 2
    merged = [json.loads(x) for x in (tmp_path / "trials.jsonl").read_text().splitlines()]
    assert sorted(r["trial_key"] for r in merged) == ["t1", "t2"]
    assert all(r["error"] is None for r in merged)
    frame = load_trial_frame(tmp_path)
    assert sorted(frame["trial_key"]) == ["t1", "t2"]


def lines_of(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_group_commit_writes_each_group_at_once_and_close_commits_the_tail(tmp_path):
    path = tmp_path / "trials.jsonl"
    with TrialStore(path, commit=Commit(every=4, ms=3_600_000)) as store:
        for i in range(3):
            store.append(trial(f"t{i}"))
        assert lines_of(path) == []  # queued, not yet committed
        assert store.done("t2") and store.cached_call("c-t1")["raw_output"] == "Answer: A"  # readable while queued
        store.append(trial("t3"))
        assert [r["trial_key"] for r in lines_of(path)] == ["t0", "t1", "t2", "t3"]
        store.append(trial("t4"))
    assert len(lines_of(path)) == 5  # close commits what is queued
    with TrialStore(path, commit=Commit(every=1)) as store:  # per trial: on disk before append returns
        store.append(trial("t5"))
        assert len(lines_of(path)) == 6


def test_auto_durability_keeps_per_trial_fsync_for_paid_runners_only():
    """`paid`: the runner declares that its answers cost money (runners.base.CostReporting; tests/runners/
    test_capabilities.py drives the choice through the audit)."""
    assert commit_policy(Durability.auto, paid=True) == PER_TRIAL
    assert commit_policy(Durability.auto, paid=False, group_trials=64, group_ms=500) == Commit(every=64, ms=500.0)
    assert commit_policy("per_trial", paid=False) == PER_TRIAL
    assert commit_policy("group", paid=True, group_trials=8).every == 8


def test_the_index_holds_keys_not_records(tmp_path):
    """Opening a store of 2,000 trials of 2 kB each must not load them: records are read back when needed."""
    path = tmp_path / "trials.jsonl"
    with path.open("w") as fh:
        for i in range(2000):
            t = trial(f"t{i}")
            t.raw_output = f"Answer: A {i} " + "x" * 2000
            fh.write(t.to_json() + "\n")
    tracemalloc.start()
    store = TrialStore(path)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    try:
        assert held < 1_000_000, f"opening held {held} bytes for 4 MB of records"
        assert store.cached_call("c-t1234")["raw_output"].startswith("Answer: A 1234 ")
        assert store.legacy_record(["t7"], "m")["trial_key"] == "t7" and store.legacy_record(["t7"], "other") is None
        assert len(store.records()) == 2000
    finally:
        store.close()


def test_the_shared_cache_is_read_back_by_offset(tmp_path):
    cache = tmp_path / "cache"
    with TrialStore(tmp_path / "r1" / "trials.jsonl", cache_path=cache, commit=Commit(every=3, ms=1e9)) as s:
        for i in range(5):
            s.append(trial(f"t{i}", answer="BCDEF"[i]))
    with TrialStore(tmp_path / "r2" / "trials.jsonl", cache_path=cache) as s:
        assert [s.cached_call(f"c-t{i}")["raw_output"] for i in range(5)] == [f"Answer: {a}" for a in "BCDEF"]


def test_merge_keeps_memory_to_keys_and_copies_the_winning_lines(tmp_path):
    a, b = tmp_path / "trials.shard-0-of-2.jsonl", tmp_path / "trials.shard-1-of-2.jsonl"
    a.write_text(trial("t1", error="HTTP 500").to_json() + "\n" + trial("t2").to_json() + "\n")
    b.write_text(trial("t1", answer="B").to_json() + "\n" + trial("t2", answer="C").to_json() + "\n")
    assert merge_trial_files([a, b], tmp_path / "trials.jsonl") == 2
    merged = {r["trial_key"]: r for r in lines_of(tmp_path / "trials.jsonl")}
    assert merged["t1"]["answer_normalized"] == "B" and merged["t2"]["answer_normalized"] == "A"  # first success


ROOT = Path(__file__).resolve().parents[2]
AUDIT = ["model=seeded_random", "+model.latency_s=0.02", "facet=option_order", "dataset=synthetic_mcq", "limit=20",
         "progress=false"]


@pytest.mark.slow
def test_a_killed_group_commit_run_loses_only_its_unsynced_tail_and_resumes_whole(tmp_path):
    run = tmp_path / "run"
    trials = run / "trials.jsonl"
    args = [f"hydra.run.dir={run}", *AUDIT, "store.durability=group", "store.group_trials=8", "store.group_ms=3600000"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    # a process of its own: SIGKILL mid-run is the contract (what a pre-empted job leaves behind)
    cmd = [sys.executable, "-m", "facet_probe", *args]
    at_kill = kill_when(cmd, lambda: len(lines_of(trials)) if trials.exists() else 0, 24, cwd=ROOT, env=env)
    repair_torn_tail(trials)
    survived = lines_of(trials)  # every line parses: nothing corrupt
    assert len(survived) >= at_kill  # nothing that was committed is lost
    assert len(survived) % 8 == 0  # whole groups only: what was lost is the queued tail
    assert len({r["trial_key"] for r in survived}) == len(survived)
    done = run_module("facet_probe", *args, cwd=ROOT)  # the resume: in this process
    assert done.returncode == 0, done.stderr[-2000:]
    final = lines_of(trials)
    assert len(final) == 120 and len({r["trial_key"] for r in final}) == 120  # 20 items x K=6, no duplicates
    assert [r["trial_key"] for r in final[:len(survived)]] == [r["trial_key"] for r in survived]


def test_chunked_fast_reading_keeps_json_rules_across_chunk_ends(tmp_path, monkeypatch, caplog):
    import facet_probe.store.reading as trial_io

    monkeypatch.setattr(trial_io, "CHUNK_BYTES", 300)  # many chunks, ends inside lines
    path = tmp_path / "trials.jsonl"
    lines = [trial(f"t{i}", answer="é✓" if i % 3 else "A").to_json() for i in range(20)]
    lines[5] = lines[5].replace('"latency_s": 0.0', '"latency_s": NaN')  # json reads NaN; msgspec refuses it
    path.write_text("\n".join(lines) + "\n\n" + '{"trial_key": "torn", "raw')
    got = trial_io.read_records(path)
    assert got[:5] + got[6:] == [json.loads(x) for x in lines[:5] + lines[6:]] and got[5]["latency_s"] != 0.0
    assert "torn last line" in caplog.text
    path.write_text(lines[0] + "\n{oops\n" + lines[1] + "\n")
    try:
        trial_io.read_records(path)
        raise AssertionError("a damaged line before the end must be refused")
    except trial_io.TrialsFileError as exc:
        assert ":2: malformed trial line" in str(exc)


def test_a_group_of_no_trials_is_refused_before_any_work(tmp_path):
    proc = run_module("facet_probe", f"hydra.run.dir={tmp_path / 'run'}", *AUDIT, "store.group_trials=0", cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "store.group_trials=0" in proc.stderr and "group_trials >= 1" in proc.stderr
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_a_frame_built_chunk_by_chunk_equals_one_built_from_every_record(tmp_path, monkeypatch):
    """Chunked frames halve the reading peak; where chunks would type a column differently (None in one chunk,
    text or numbers in another, a column only some records have) the frame is built whole, as before."""
    import pandas as pd

    import facet_probe.store.reading as trial_io

    rows = []
    for i in range(60):
        t = trial(f"t{i}", answer="AB"[i % 2])
        t.thinking = None if i < 30 else f"thought {i}"
        t.n_options = None if i < 45 else 4
        rec = json.loads(t.to_json())
        if i > 50:
            rec["extra"] = i
        rows.append(json.dumps(rec))
    (tmp_path / "trials.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "trials.shard-0-of-2.jsonl").write_text("\n".join(rows[:10]) + "\n")
    monkeypatch.setattr(trial_io, "CHUNK_BYTES", 1 << 30)
    whole = trial_io.load_trial_frame(tmp_path)
    for size in (200, 2000, 6000):
        monkeypatch.setattr(trial_io, "CHUNK_BYTES", size)
        pd.testing.assert_frame_equal(trial_io.load_trial_frame(tmp_path), whole)
    uniform = tmp_path / "uniform"
    uniform.mkdir()
    (uniform / "trials.jsonl").write_text("\n".join(trial(f"u{i}").to_json() for i in range(40)) + "\n")
    monkeypatch.setattr(trial_io, "CHUNK_BYTES", 1 << 30)
    whole = trial_io.load_trial_frame(uniform)
    monkeypatch.setattr(trial_io, "CHUNK_BYTES", 500)
    pd.testing.assert_frame_equal(trial_io.load_trial_frame(uniform), whole)


KEYS = {"OPENAI_API_KEY": "sk-openai-test-key-0123456789"}


class _OnWaiting(logging.Handler):
    """Sets `event` when the shared cache says a run waits for calls another run is making."""

    def __init__(self, event) -> None:
        super().__init__(logging.INFO)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "that another run sharing this cache is making" in record.getMessage():
            self.event.set()


@pytest.mark.slow
def test_two_runs_sharing_a_cache_at_once_pay_each_distinct_call_once(tmp_path, monkeypatch):
    """Two audits in two folders with one `store.cache_dir`, at once: the first (a process of its own) claims
    its calls; the second (here) finds them claimed, waits, and takes every answer from the cache. The provider
    holds every answer until the second run waits (or, before the fix, calls too), so none is there to reuse
    when it plans (issue 43: 118 calls for 60 distinct requests)."""
    import threading

    from facet_probe import api
    from facet_probe_dev.testing.fake_providers import FakeProviderServer

    for key, value in {**KEYS, "HF_HUB_OFFLINE": "1"}.items():
        monkeypatch.setenv(key, value)
    arrived, release = threading.Event(), threading.Event()

    def held(call) -> float:  # no answer before the second run waits, or sends a call of its own
        if (tmp_path / "b" / "trials.jsonl").exists():
            release.set()
        arrived.set()
        release.wait(120)
        return 0.0

    store_log = logging.getLogger("facet_probe.store.trial_store")
    on_waiting = _OnWaiting(release)
    monkeypatch.setattr(store_log, "level", logging.INFO)
    store_log.addHandler(on_waiting)
    with FakeProviderServer(latency_for=held) as server:
        args = ["model=gpt_54_mini", f"model.base_url={server.url}/v1", "facet=option_order",
                "dataset=synthetic_mcq", "limit=4", "progress=false", f"store.cache_dir={tmp_path / 'cache'}"]
        # a process of its own: two processes contending for the shared cache's claims is the contract
        first = subprocess.Popen([sys.executable, "-m", "facet_probe", f"hydra.run.dir={tmp_path / 'a'}", *args],
                                 cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            assert arrived.wait(120), first.communicate()[1][-3000:]  # the first run is calling
            api.audit([f"hydra.run.dir={tmp_path / 'b'}", *args])
        finally:
            store_log.removeHandler(on_waiting)
            release.set()
            error = first.communicate(timeout=300)[1]
        asked = [c.texts()[-1] for c in server.ok_calls()]
    assert first.returncode == 0, error[-3000:]
    runs = [lines_of(tmp_path / name / "trials.jsonl") for name in ("a", "b")]
    assert [len({r["trial_key"] for r in run}) for run in runs] == [24, 24]  # 4 items x K=6 each
    assert len(asked) == len(set(asked)) == 24, f"{len(asked)} calls for {len(set(asked))} distinct requests"
    by_key = [{r["call_key"]: r["raw_output"] for r in run} for run in runs]
    assert by_key[0] == by_key[1]  # both runs hold the same answers


def test_a_claimed_call_is_waited_for_and_taken_from_the_shared_cache(tmp_path):
    """A call another run has claimed is not this run's to make: once its answer is on disk it is read from
    the shared cache; a failed (released, unanswered) one becomes this run's to make."""
    cache = tmp_path / "cache"
    with TrialStore(tmp_path / "a" / "trials.jsonl", cache_path=cache) as a, \
            TrialStore(tmp_path / "b" / "trials.jsonl", cache_path=cache) as b:
        assert a.claim_calls(["c-t1", "c-t2"]) == {"c-t1", "c-t2"}
        assert b.claim_calls(["c-t1", "c-t2"]) == set()
        a.append(trial("t1", answer="C"))  # on disk: its claim is given up
        assert b.wait_for_calls(["c-t1", "c-t2"]) == ["c-t1"]
        assert b.claim_calls(["c-t1"]) == set() and b.cached_call("c-t1")["raw_output"] == "Answer: C"
        a.append(trial("t2", error="HTTP 500"))
        a.release_calls(["c-t1", "c-t2"])
        assert b.wait_for_calls(["c-t2"]) == ["c-t2"] and b.claim_calls(["c-t2"]) == {"c-t2"}
        assert b.cached_call("c-t2") is None


KILLED_CLAIMANT = """
import sys, time
from facet_probe.store.trial_store import TrialStore
from facet_probe.core.trials import Trial
store = TrialStore(sys.argv[1], cache_path=sys.argv[2])
store.claim_calls(["c-t1", "c-t2"])
store.append(Trial(trial_key="t1", call_key="c-t1", model="m", facet="option_order", dataset="d", item_id="d::1",
                   ordering_idx=0, repeat_idx=0, permutation=[0, 1], component_ids=["a", "b"], prompt_hash="h",
                   mode="direct", raw_output="Answer: B", answer_normalized="B", parse_status="ok"))
print("ready", flush=True)
time.sleep(60)
"""


def test_the_claims_of_a_killed_run_never_block_the_other(tmp_path):
    """kill -9 of a run holding claims in the shared cache: the other run finds them free (what was answered
    before the kill is read from the cache) and makes the rest itself."""
    cache = tmp_path / "cache"
    # a process of its own: its claims must outlive a SIGKILL of the process holding them
    child = subprocess.Popen([sys.executable, "-c", KILLED_CLAIMANT, str(tmp_path / "a" / "trials.jsonl"),
                              str(cache)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with TrialStore(tmp_path / "b" / "trials.jsonl", cache_path=cache) as b:
            assert b.claim_calls(["c-t1", "c-t2"]) == set()
            assert b.cached_call("c-t1")["raw_output"] == "Answer: B"
            child.send_signal(signal.SIGKILL)
            child.wait()
            assert b.wait_for_calls(["c-t2"]) == ["c-t2"]  # free once its owner is gone
            assert b.claim_calls(["c-t2"]) == {"c-t2"}
    finally:
        child.kill()
        child.wait()


# ---------------------------------------------------------------- a full disk (issue 43, point 5)

@contextlib.contextmanager
def disk_full_at(size: int) -> Iterator[None]:
    """Within: the kernel lets no file this process writes grow past `size` bytes (RLIMIT_FSIZE: a write across
    it is cut short there, the next fails with EFBIG), as a disk that fills up; no function of ours is replaced."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the error, not the signal that would end the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def stopped_by_the_full_disk(trials: Path, err: str) -> tuple[list[bytes], int]:
    """(the lines stored, how many trials made were not written) of a run the full disk stopped, from its one
    `error:` line, which names the file and says both; every line stored is whole."""
    lines = trials.read_bytes().splitlines(keepends=True)
    assert all(json.loads(line)["trial_key"] for line in lines)
    error = [e for e in err.splitlines() if e.startswith("error: ")]
    said = re.fullmatch(
        rf"error: cannot write {re.escape(str(trials))}: \[Errno 27\] File too large; the run stopped at this first "
        rf"failed write: trials.jsonl holds {len(lines)} trials; (\d+) more made since (was|were) not written; free "
        r"space on that disk \(or lift the quota or file size limit\), then re-run the same command \(what is "
        r"stored is kept and not done again\)", error[0]) if len(error) == 1 else None
    assert said, err
    return lines, int(said[1])


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_a_full_disk_stops_the_audit_at_the_first_failed_write_and_the_resume_completes(tmp_path):
    """The disk fills after 16 of 60 trials (group commit, as a reference policy's): one line says where and how
    much is stored, nothing says the 60 are stored (the log's counts, run_status.json); with room again the same
    command completes the run and its report, the stored trials kept as they were."""
    run = tmp_path / "run"
    args = [f"hydra.run.dir={run}", "progress=false", "model=oracle", "facet=option_order", "dataset=synthetic_mcq",
            "limit=10", "bootstrap=10"]
    with disk_full_at(16_000):
        code, err = app_says("facet_probe", *args)
    assert code == 2
    stored, lost = stopped_by_the_full_disk(run / "trials.jsonl", err)
    assert 0 < len(stored) < 60 and lost == 60 - len(stored)
    assert " called, " not in err and " called, " not in (run / "audit.log").read_text()
    assert "oracle" not in json.loads((run / "run_status.json").read_text()).get("models", {})
    code, err = app_says("facet_probe", *args)
    assert code == 0, err
    assert f"oracle: 60 trials ({len(stored)} already stored, 0 re-keyed, 0 reused, {60 - len(stored)} called" in err
    lines = (run / "trials.jsonl").read_bytes().splitlines(keepends=True)
    assert lines[: len(stored)] == stored and len({json.loads(line)["trial_key"] for line in lines}) == len(lines) == 60
    assert (run / "summary.csv").is_file() and (run / "report.md").is_file()


#: one call in flight: none is cut off when the run stops (the fake server would print the reset connection)
ONE_AT_A_TIME = ("model.concurrency.initial=1", "model.concurrency.max_in_flight=1")


def test_a_full_disk_loses_at_most_the_paid_call_being_written(tmp_path):
    """Paid calls are stored one by one (per-trial durability, `store.durability=auto`): a disk that fills up
    mid-run loses the one trial whose write failed, never a queued group of paid answers."""
    with FakeProviderServer() as server, disk_full_at(10_000):
        code, err = app_says("facet_probe", *openai_compat(tmp_path, server, "k=6", *ONE_AT_A_TIME))
    assert code == 2
    stored, lost = stopped_by_the_full_disk(tmp_path / "run" / "trials.jsonl", err)
    assert lost == 1 and 3 <= len(stored) < 18


def test_ctrl_c_during_a_groups_fsync_never_writes_the_group_twice(tmp_path, monkeypatch):
    """A SIGINT landing while a group's fsync ran (the group already written) raised out of the write with the group
    still queued: closing the store wrote it again, the same trials twice (the interrupted audit's 48 trials were
    96 lines, the resume found 48). The interrupt now waits until the store has noted the group as written."""
    real_fsync = os.fsync

    def fsync_then_ctrl_c(fd):
        real_fsync(fd)
        signal.raise_signal(signal.SIGINT)  # as a terminal's Ctrl-C: Python's handler raises KeyboardInterrupt

    restore = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        store = TrialStore(tmp_path / "trials.jsonl", commit=Commit(every=3))
        store.append(trial("t1"))
        store.append(trial("t2"))
        monkeypatch.setattr("facet_probe.store.jsonl.os.fsync", fsync_then_ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            store.append(trial("t3"))
        monkeypatch.setattr("facet_probe.store.jsonl.os.fsync", real_fsync)
        store.close()
    finally:
        signal.signal(signal.SIGINT, restore)
    keys = [json.loads(line)["trial_key"] for line in (tmp_path / "trials.jsonl").read_text().splitlines()]
    assert keys == ["t1", "t2", "t3"]
