"""Issue 28 (2): a store written when the fingerprint named the configured attention ("auto") resumes under the
fingerprint of the implementation used, with no new call, in its own folder (re-keyed) and in another one through
the shared call cache (reused); a record made with another implementation is not taken for this one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from facet_probe.core.trials import call_key, fingerprint_hash, trial_key
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[3]
ARGS = ["model=tiny_vlm", "model.attn_implementation=auto", "facet=option_order", "dataset=synthetic_mcq", "limit=2",
        "k=2", "progress=false"]


def _audit(run: Path, cache: Path) -> dict:
    proc = run_module("facet_probe", f"hydra.run.dir={run}", f"store.cache_dir={cache}", *ARGS, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((run / "run_status.json").read_text())["models"]["tiny_vlm"]


def _as_older_code_wrote_it(run: Path, fingerprint: dict) -> list[dict]:
    """The trials as the code before issue 28 keyed them: the fingerprint naming attn_implementation=auto."""
    old_fp = fingerprint_hash({**fingerprint, "attn_implementation": "auto"})
    records = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines() if line]
    for rec in records:
        rec["call_key"] = call_key(old_fp, rec["prompt_hash"], rec["repeat_idx"])
        rec["trial_key"] = trial_key(rec["call_key"], rec["model"], rec["facet"], rec["item_id"],
                                     rec["ordering_idx"], rec["seed"], rec["k"])
        rec["model_fingerprint"] = old_fp
    return records


def _write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    for stale in path.parent.glob("trials.parquet"):
        stale.unlink()


@pytest.mark.slow  # three audits of the tiny VLM
def test_an_auto_keyed_store_resumes_with_no_new_call_and_another_attention_is_called_again(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    first = _audit(run, cache)
    assert first["fingerprint"]["attn_implementation"] == "sdpa"  # what ran, not "auto"
    planned = first["planned"]
    older = _as_older_code_wrote_it(run, first["fingerprint"])
    answers = {(r["item_id"], r["ordering_idx"]): r["raw_output"] for r in older}
    older[0]["provenance"]["attn_implementation"] = "flash_attention_2"  # made by another kernel: not this call
    _write(run / "trials.jsonl", older)
    _write(cache / "calls.jsonl", [{k: r.get(k) for k in ("call_key", "raw_output", "thinking", "usage", "provenance",
                                                           "latency_s", "model_fingerprint")} for r in older])

    fresh = _audit(tmp_path / "fresh", cache)  # another folder, the shared cache of older calls
    assert (fresh["reused"], fresh["called"]) == (planned - 1, 1)
    _write(cache / "calls.jsonl", [])  # the resume below must not lean on the cache
    resumed = _audit(run, cache)
    assert (resumed["migrated"], resumed["called"], resumed["reused"]) == (planned - 1, 1, 0)
    latest = {}
    for line in (run / "trials.jsonl").read_text().splitlines():
        rec = json.loads(line)
        latest[rec["trial_key"]] = rec
    current = [r for r in latest.values() if r["model_fingerprint"] == fingerprint_hash(resumed["fingerprint"])]
    assert len(current) == planned
    assert {(r["item_id"], r["ordering_idx"]): r["raw_output"] for r in current} == answers  # greedy: the same
