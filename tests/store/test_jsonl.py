"""Append-only JSONL files: durable appends, and a torn last line cut off before the next append, for every
such file (trials, call cache, judgments, attack results)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from facet_probe.attack.outputs import ResultsFile
from facet_probe.core.errors import ConfigError
from facet_probe.core.items import make_item
from facet_probe.judge import judge_trials, read_judgments
from facet_probe.store.jsonl import append_record, iter_records, repair_torn_tail
from facet_probe.store.trial_store import CallCache
from facet_probe_dev.testing.fake_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parents[2]
ITEMS = [make_item(item_id=f"free::{i}", dataset="free", question=f"Question {i}?", answer_type="free",
                   gold_answer="yes") for i in range(3)]


def trials_frame() -> pd.DataFrame:
    return pd.DataFrame([{"model": "m", "item_id": it.item_id, "trial_key": f"m-{it.item_id}-{k}", "facet": "f",
                          "ordering_idx": k, "repeat_idx": 0, "raw_output": f"Answer: yes {k}",
                          "answer_raw": f"yes {k}", "parse_status": "ok", "error": None}
                         for it in ITEMS for k in range(3)])


def equivalent(call) -> str:
    n = len(re.findall(r"Answer \d+(?: \(reference\))?:\n", call.texts()[-1]))
    return json.dumps({"verdicts": [{"answer": i, "verdict": "A", "reason": "same"} for i in range(2, n + 1)]})


def judge(base_url: str):
    cfg = OmegaConf.load(ROOT / "facet_probe/conf/model/gemini_31_pro.yaml")
    cfg.base_url = base_url
    cfg.concurrency.backoff_base_s = 0.01
    return instantiate(cfg)


def test_a_torn_judgments_tail_does_not_break_the_next_judge_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "g-test-key-not-real")
    cache = tmp_path / "judgments.jsonl"
    with FakeProviderServer(reply=equivalent) as server:
        judge_trials(trials_frame(), ITEMS, judge(server.url), cache)
        lines = cache.read_bytes().splitlines(keepends=True)
        cache.write_bytes(b"".join(lines[:-1]) + lines[-1][:50])  # a kill in the middle of the last record
        judge_trials(trials_frame(), ITEMS, judge(server.url), cache)  # re-judges the torn case
        again = judge_trials(trials_frame(), ITEMS, judge(server.url), cache)  # crashed here before
        assert len(server.calls) == 3 + 1
    records = list(iter_records(cache))
    assert len(records) == 3 and len({r["judgment_key"] for r in records}) == 3
    assert len(read_judgments(cache)) == 3 and len(again) == 9
    assert (tmp_path / "judgments.jsonl.torn").read_bytes() == lines[-1][:50] + b"\n"


def test_repair_cuts_only_an_unterminated_tail(tmp_path):
    path = tmp_path / "x.jsonl"
    assert repair_torn_tail(path) == 0  # no file
    append_record(path, {"a": 1})
    with path.open("a", encoding="utf-8") as fh:
        append_record(fh, {"b": "é"})
    assert repair_torn_tail(path) == 0
    assert [r for r in iter_records(path)] == [{"a": 1}, {"b": "é"}]
    with path.open("ab") as fh:
        fh.write(b'{"c": ')
    assert repair_torn_tail(path) == 6
    append_record(path, {"d": 4})
    assert [r for r in iter_records(path)] == [{"a": 1}, {"b": "é"}, {"d": 4}]
    path.write_bytes(b'{"only": "torn')
    assert repair_torn_tail(path) == len(b'{"only": "torn') and path.read_bytes() == b""


def test_the_call_cache_and_attack_results_repair_their_tails(tmp_path):
    cache = CallCache(tmp_path / "cache")
    cache.put({"call_key": "k1", "raw_output": "x"})
    cache.close()
    with (tmp_path / "cache" / "calls.jsonl").open("ab") as fh:
        fh.write(b'{"call_key": "k2", "raw')
    cache = CallCache(tmp_path / "cache")
    cache.put({"call_key": "k3", "raw_output": "y"})
    cache.close()
    assert [r["call_key"] for r in iter_records(tmp_path / "cache" / "calls.jsonl")] == ["k1", "k3"]

    results = tmp_path / "results.jsonl"
    results.write_text('{"sample_id": "s1"}\n{"sample_id": "s2", "cle')
    rf = ResultsFile(results)
    assert set(rf.rows) == {"s1"}
    rf.append({"sample_id": "s2"})
    assert [r["sample_id"] for r in iter_records(results)] == ["s1", "s2"]
    assert (tmp_path / "results.jsonl.torn").exists()


def test_a_damaged_middle_line_of_attack_results_is_a_user_error(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"sample_id": "s1"}\nnot json\n{"sample_id": "s2"}\n')
    with pytest.raises(ConfigError, match=":2: malformed"):
        ResultsFile(results)
