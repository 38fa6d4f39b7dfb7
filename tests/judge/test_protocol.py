"""`judge.protocol=reference`: FACET-PROBE v0.0.1's set-level judge (ONE verdict A-D for a case's K answers)
and its sem_flip = (B + C) / n with D in n, through the real google-genai SDK and the loopback fake provider;
the per-answer protocol's share stays beside it as `sem_flip_answers`."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from facet_probe.core.items import make_item
from facet_probe.judge import JudgeParseError, judge_trials, parse_set_verdict, read_judgments, semantic_flip
from facet_probe.judge.protocol import REFERENCE_SYSTEM
from facet_probe.metrics.flips import CELL_KEYS
from facet_probe.report.judge_join import add_semantic_flip
from facet_probe_dev.testing.fake_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "g-judge-test-key-0123456789"
#: item -> (raw outputs of orderings 0..2, the set verdict the stand-in judge gives)
CASES = {
    "mix::0": (["Paris", "Paris.", "It is Paris"], "A"),
    "mix::1": (["red", "red", "red and blue"], "B"),
    "mix::2": (["Ada", "Bob", "Cy"], "C"),
    "mix::3": (["", "x", "x"], "D"),
    "mix::4": (["1912", "1921", "1912"], "C"),
}
ITEMS = [make_item(item_id=i, dataset="mix", question=f"Question {i}?", answer_type="free", gold_answer="g")
         for i in CASES]


def trials() -> pd.DataFrame:
    return pd.DataFrame([
        {"model": "m", "facet": "mixed_modality_order", "dataset": "mix", "item_id": item_id,
         "trial_key": f"m-{item_id}-{k}", "ordering_idx": k, "repeat_idx": 0, "raw_output": text,
         "answer_raw": text[-4:], "parse_status": "ok", "error": None}
        for item_id, (outs, _) in CASES.items() for k, text in enumerate(outs)])


def set_judge(call) -> str:
    """Gives each question's planned set verdict, in the reference's reply format."""
    item_id = re.search(r"QUESTION: Question (mix::\d)\?", call.texts()[-1]).group(1)
    return f"Verdict: {CASES[item_id][1]}\nReason: planned for {item_id}"


def gemini(url: str):
    cfg = OmegaConf.load(ROOT / "facet_probe/conf/model/gemini_31_pro.yaml")
    cfg.base_url = url
    cfg.concurrency.backoff_base_s = 0.01
    return instantiate(cfg)


@pytest.fixture(autouse=True)
def judge_key(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)


def test_reference_prompt_on_the_wire(tmp_path):
    with FakeProviderServer(reply=set_judge) as server:
        judge_trials(trials(), ITEMS, gemini(server.url), tmp_path / "j.jsonl", protocol="reference")
        calls = {re.search(r"QUESTION: Question (mix::\d)", c.texts()[-1]).group(1): c for c in server.calls}
    assert len(calls) == 5
    call = calls["mix::2"]
    assert call.system == REFERENCE_SYSTEM
    text = call.texts()[-1]
    assert text.startswith("A multimodal model was asked the same question 3 times.\n")
    assert "QUESTION: Question mix::2?\n\nANSWER 1: Ada\nANSWER 2: Bob\nANSWER 3: Cy\n\n" in text
    assert "Decide ONE label that best characterizes the set of answers:" in text
    assert "D. UNPARSABLE - at least one answer is too short" in text
    assert text.endswith("Verdict: <A|B|C|D>\nReason: <one short sentence, <=30 words>\n")
    assert "ANSWER 3: It is Paris" in calls["mix::0"].texts()[-1]  # the raw output, not the parsed tail


def test_reference_reply_parsing():
    verdict, answers = parse_set_verdict("Verdict: b\nReason: one adds blue", 3)
    assert (verdict.verdict, verdict.reason) == ("B", "one adds blue") and len(answers) == 3
    verdict, _ = parse_set_verdict("**Verdict:** (C)\n**Reason:** different names", 3)
    assert verdict.verdict == "C" and verdict.reason == "different names"
    _, answers = parse_set_verdict("Verdict: A\nReason: same\nGold: 1=yes, 2=no, 3=yes", 3, gold_anchored=True)
    assert [a.gold_match for a in answers] == [True, False, True]
    with pytest.raises(JudgeParseError, match="Verdict"):
        parse_set_verdict("They all look fine.", 3)


def test_reference_sem_flip_is_b_plus_c_over_n_with_d_in_n(tmp_path):
    with FakeProviderServer(reply=set_judge) as server:
        judged = judge_trials(trials(), ITEMS, gemini(server.url), tmp_path / "j.jsonl", judge_name="gemini_pro",
                              protocol="reference")
    flips = semantic_flip(judged)
    assert flips.set_index("item_id").set_verdict.to_dict() == {i: v for i, (_, v) in CASES.items()}
    counts = pd.Series([v for _, v in CASES.values()]).value_counts()
    by_hand = (counts.get("B", 0) + counts.get("C", 0)) / len(CASES)  # (1 + 2) / 5, the D counted in n
    assert by_hand == 0.6
    flips.to_csv(tmp_path / "semantic_flip.csv", index=False)
    summary = pd.DataFrame({"model": ["m"], "facet": ["mixed_modality_order"], "dataset": ["mix"]})
    summary = add_semantic_flip(summary, trials(), tmp_path / "semantic_flip.csv")
    assert summary.loc[0, "sem_flip_set_gemini_pro"] == pytest.approx(by_hand)
    assert "sem_flip_answers_gemini_pro" not in summary  # the set protocol gives no per-answer verdicts
    assert summary[CELL_KEYS].to_dict("records") == [
        {"model": "m", "facet": "mixed_modality_order", "dataset": "mix"}]


def test_an_unreadable_set_reply_is_an_error_retried_next_time(tmp_path):
    cache = tmp_path / "j.jsonl"
    with FakeProviderServer(reply=lambda call: "I think they are fine") as bad:
        assert judge_trials(trials(), ITEMS, gemini(bad.url), cache, protocol="reference").empty
    assert read_judgments(cache) == {}
    with FakeProviderServer(reply=set_judge) as good:
        judged = judge_trials(trials(), ITEMS, gemini(good.url), cache, protocol="reference")
        assert len(good.calls) == 5
    assert judged.groupby("item_id").set_verdict.first().tolist() == ["A", "B", "C", "D", "C"]


def test_both_columns_side_by_side_under_per_answer(tmp_path):
    """Per answer, the same cell reports the share of answers judged B or C and the set-level (B + C) / n
    derived from them (D first, then C, then B)."""
    def per_answer(call):
        answers = re.findall(r"Answer \d+(?: \(reference\))?:\n(.*?)\n", call.texts()[-1])
        label = lambda a: "D" if "(empty)" in (a, answers[0]) else "A" if a == answers[0] else "C"  # noqa: E731
        return "\n".join(f"Answer {i}: {label(a)} - x" for i, a in enumerate(answers[1:], 2))

    with FakeProviderServer(reply=per_answer) as server:
        judged = judge_trials(trials(), ITEMS, gemini(server.url), tmp_path / "j.jsonl", judge_name="j",
                              protocol="per_answer")
    flips = semantic_flip(judged).set_index("item_id")
    # parsed answers are the outputs' last 4 characters: mix::1 reads red, red, blue -> A, C
    assert flips.loc["mix::1", "sem_flip_answers"] == 0.5 and flips.loc["mix::1", "sem_flip_set"] == 1.0
    assert flips.loc["mix::3", "set_verdict"] == "D" and flips.loc["mix::3", "sem_flip_set"] == 0.0
    flips.reset_index().to_csv(tmp_path / "semantic_flip.csv", index=False)
    summary = add_semantic_flip(pd.DataFrame({"model": ["m"], "facet": ["mixed_modality_order"],
                                              "dataset": ["mix"]}), trials(), tmp_path / "semantic_flip.csv")
    assert summary.loc[0, "sem_flip_set_j"] == pytest.approx(flips.sem_flip_set.mean())
    assert summary.loc[0, "sem_flip_answers_j"] == pytest.approx(flips.sem_flip_answers.mean())
