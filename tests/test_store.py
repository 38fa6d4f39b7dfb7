"""The trial store persists every trial at once, survives torn writes, and never duplicates."""

from __future__ import annotations

import json

from facet_probe.store import TrialStore, merge_trial_files, repair_torn_tail, shard_file
from facet_probe.trial_io import load_trial_frame
from facet_probe.trials import Trial


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
    a, b = shard_file(tmp_path, "0/2"), shard_file(tmp_path, "1/2")
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
