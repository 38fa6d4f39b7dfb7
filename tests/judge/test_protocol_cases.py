"""Judge cases do not collide: two models whose answers read the same share one judge call, yet each
(model, facet, dataset, item, repeat) case gets its own verdicts; a cache written before the fix is reused.

The judge is driven through the real google-genai SDK against the loopback fake provider.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from facet_probe.core.items import make_item
from facet_probe.core.trials import fingerprint_hash
from facet_probe.judge import judge_prompt, judge_trials, read_judgments
from facet_probe.judge.protocol import JudgeCase, JudgeItem, legacy_judgment_key
from facet_probe_dev.testing.fake_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "g-judge-test-key-0123456789"
N_ITEMS, K = 20, 3
ITEMS = [make_item(item_id=f"mix::{i}", dataset="mix", question=f"Q{i}?", answer_type="free", gold_answer="a")
         for i in range(N_ITEMS)]


def answers_of(i: int) -> list[str]:
    return ["a", "a", "a"] if i % 2 else ["a", "a", "b"]


def trials(models=("m1", "m2")) -> pd.DataFrame:
    rows = [{"model": m, "facet": "mixed_modality_order", "dataset": "mix", "item_id": f"mix::{i}",
             "trial_key": f"{m}-{i}-{k}", "ordering_idx": k, "repeat_idx": 0, "raw_output": f"Answer: {t}",
             "answer_raw": t, "parse_status": "ok", "error": None}
            for m in models for i in range(N_ITEMS) for k, t in enumerate(answers_of(i))]
    return pd.DataFrame(rows)


def per_answer_judge(call) -> str:
    answers = re.findall(r"Answer \d+(?: \(reference\))?:\n(.*?)\n", call.texts()[-1])
    return json.dumps({"verdicts": [{"answer": i, "verdict": "A" if a == answers[0] else "C", "reason": "-"}
                                    for i, a in enumerate(answers[1:], 2)]})


def gemini(url: str):
    cfg = OmegaConf.load(ROOT / "facet_probe/conf/model/gemini_31_pro.yaml")
    cfg.base_url = url
    return instantiate(cfg)


@pytest.fixture(autouse=True)
def judge_key(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)


def test_two_models_with_identical_answers_each_get_their_verdicts(tmp_path):
    with FakeProviderServer(reply=per_answer_judge) as server:
        judged = judge_trials(trials(), ITEMS, gemini(server.url), tmp_path / "judgments.jsonl",
                              protocol="per_answer")
        assert len(server.calls) == N_ITEMS  # identical prompts share one call
    cases = judged.groupby(["model", "item_id"]).size()
    assert len(cases) == 2 * N_ITEMS and (cases == K).all()
    assert set(judged.trial_key) == set(trials().trial_key)
    for model in ("m1", "m2"):
        mine = judged[judged.model == model]
        assert mine.trial_key.str.startswith(model + "-").all()
        assert (mine.verdict == "C").sum() == N_ITEMS // 2


def test_a_case_is_per_facet_and_repeat(tmp_path):
    frame = pd.concat([trials(("m1",)), trials(("m1",)).assign(
        repeat_idx=1, trial_key=lambda f: f.trial_key + "-r1")])
    with FakeProviderServer(reply=per_answer_judge) as server:
        judged = judge_trials(frame, ITEMS, gemini(server.url), tmp_path / "j.jsonl", protocol="per_answer")
        assert len(server.calls) == N_ITEMS  # repeat 1 reads as repeat 0: same prompt, one call
        assert all(len(re.findall(r"Answer \d+", c.texts()[-1])) == K for c in server.calls)  # K, not K x R
    assert judged.groupby(["item_id", "repeat_idx"]).size().eq(K).all() and len(judged) == 2 * N_ITEMS * K


def test_a_cache_written_before_the_fix_is_reused_without_a_call(tmp_path):
    """A record as the old code wrote it (keyed by fingerprint and prompt only, credited to m1) serves m1
    and m2 with no call."""
    cache = tmp_path / "judgments.jsonl"
    with FakeProviderServer(reply=per_answer_judge) as server:
        runner = gemini(server.url)
        fingerprint = fingerprint_hash({**runner.fingerprint(), "gold_anchored": False, "max_answer_chars": 2000})
        with cache.open("w") as fh:
            for i, item in enumerate(ITEMS):
                case = JudgeCase("m1", JudgeItem.of(item), tuple(f"m1-{i}-{k}" for k in range(K)),
                                 tuple(range(K)), (0,) * K, tuple(answers_of(i)))
                key = legacy_judgment_key(fingerprint, judge_prompt(case, False, "per_answer"))
                verdicts = [{"answer": 1, "verdict": None, "reason": "reference", "gold_match": None}] + [
                    {"answer": n, "verdict": "A" if a == "a" else "C", "reason": "old", "gold_match": None}
                    for n, a in enumerate(answers_of(i)[1:], 2)]
                fh.write(json.dumps({"judgment_key": key, "judge": "gemini_pro", "judge_fingerprint": fingerprint,
                                     "model": "m1", "item_id": item.item_id, "trial_keys": list(case.trial_keys),
                                     "ordering_idx": list(range(K)), "repeat_idx": [0] * K,
                                     "verdicts": verdicts, "raw_output": "{}", "error": None, "usage": {},
                                     "cost_usd": 0.01}) + "\n")
        judged = judge_trials(trials(), ITEMS, runner, cache, judge_name="gemini_pro", protocol="per_answer")
        assert len(server.calls) == 0
        again = judge_trials(trials(), ITEMS, runner, cache, judge_name="gemini_pro", protocol="per_answer")
        assert len(server.calls) == 0
    assert len(judged) == 2 * N_ITEMS * K and set(judged.reason.dropna()) == {"reference", "old"}
    pd.testing.assert_frame_equal(judged.drop(columns="judgment_key"), again.drop(columns="judgment_key"))
    aliased = [r for r in read_judgments(cache).values() if r.get("aliased_from")]
    assert len(aliased) == 2 * N_ITEMS and all(r["cost_usd"] == 0 for r in aliased)


def test_a_run_judged_before_the_fix_is_re_reported_right_with_no_call(tmp_path):
    """The report app (no provider at all) rebuilds the judge's tables from an older judgments.jsonl: both
    models' cases, not the one the collided record was credited to."""
    from facet_probe.core.trials import Trial
    from facet_probe_dev.testing.in_process import run_module

    run = tmp_path / "run"
    run.mkdir()
    with (run / "items.jsonl").open("w") as fh:
        for item in ITEMS:
            fh.write(json.dumps(item.model_dump(mode="json")) + "\n")
    with (run / "trials.jsonl").open("w") as fh:
        for row in trials().to_dict("records"):
            fh.write(Trial(trial_key=row["trial_key"], call_key="c-" + row["trial_key"], model=row["model"],
                           facet=row["facet"], dataset="mix", item_id=row["item_id"],
                           ordering_idx=row["ordering_idx"], repeat_idx=0, permutation=[0], component_ids=["c"],
                           prompt_hash="h", mode="direct", raw_output=row["raw_output"],
                           answer_raw=row["answer_raw"], parse_status="ok").to_json() + "\n")
    with (run / "judgments.jsonl").open("w") as fh:  # as the old code left it: each prompt credited to m2
        for i, item in enumerate(ITEMS):
            verdicts = [{"answer": 1, "verdict": None, "reason": "reference", "gold_match": None}] + [
                {"answer": n, "verdict": "A" if a == "a" else "C", "reason": "old", "gold_match": None}
                for n, a in enumerate(answers_of(i)[1:], 2)]
            fh.write(json.dumps({"judgment_key": f"old{i:04d}", "judge": "gemini_pro", "judge_fingerprint": "f",
                                 "model": "m2", "item_id": item.item_id,
                                 "trial_keys": [f"m2-{i}-{k}" for k in range(K)], "ordering_idx": list(range(K)),
                                 "repeat_idx": [0] * K, "verdicts": verdicts, "raw_output": "{}", "error": None,
                                 "usage": {}, "cost_usd": 0.01}) + "\n")
    pd.DataFrame({"judge": ["gemini_pro"], "model": ["m2"], "item_id": ["mix::0"], "semantic_flip": [0.5]}).to_csv(
        run / "semantic_flip.csv", index=False)  # the old, collided table
    proc = run_module("facet_probe.report", f"input={run}", "bootstrap=10", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    flips = pd.read_csv(run / "semantic_flip.csv")
    assert len(flips) == 2 * N_ITEMS and set(flips.model) == {"m1", "m2"}
    summary = pd.read_csv(run / "summary.csv").set_index("model")
    for model in ("m1", "m2"):  # half the items flip one of their two non-reference answers
        assert summary.loc[model, "sem_flip_answers_gemini_pro"] == pytest.approx(0.25)
        assert summary.loc[model, "sem_flip_set_gemini_pro"] == pytest.approx(0.5)


def test_cases_are_built_in_key_order_each_with_its_answers_in_ordering_order():
    """One sort of the whole frame builds the cases (per-group pandas calls took minutes at paper scale): each case's
    answers in ordering order, failed trials and items that are not free-form left out, NaN keys too."""
    from facet_probe.judge.protocol import build_cases

    items = {"d::1": JudgeItem("d::1", "Q1?", "a", "free"), "d::2": JudgeItem("d::2", "Q2?", "a", "free"),
             "d::mcq": JudgeItem("d::mcq", "Q?", "A", "mcq")}
    trials = pd.DataFrame([
        {"model": "m", "item_id": "d::2", "ordering_idx": 1, "repeat_idx": 0, "trial_key": "b1", "raw_output": "two"},
        {"model": "m", "item_id": "d::2", "ordering_idx": 0, "repeat_idx": 0, "trial_key": "b0", "raw_output": "one"},
        {"model": "m", "item_id": "d::1", "ordering_idx": 0, "repeat_idx": 1, "trial_key": "r1", "raw_output": "x"},
        {"model": "m", "item_id": "d::1", "ordering_idx": 0, "repeat_idx": 0, "trial_key": "a0", "raw_output": "y"},
        {"model": "m", "item_id": "d::1", "ordering_idx": 1, "repeat_idx": 0, "trial_key": "a1", "raw_output": "z",
         "error": "HTTP 500"},
        {"model": "m", "item_id": "d::mcq", "ordering_idx": 0, "repeat_idx": 0, "trial_key": "c0", "raw_output": "A"},
        {"model": None, "item_id": "d::1", "ordering_idx": 0, "repeat_idx": 0, "trial_key": "n0", "raw_output": "q"},
        {"model": "a", "item_id": "d::2", "ordering_idx": 0, "repeat_idx": 0, "trial_key": "z0",
         "raw_output": "  " + "w" * 12 + " "},
    ])
    cases = build_cases(trials, items, max_answer_chars=10)
    assert [(c.model, c.item.item_id, c.repeat_idx, c.trial_keys) for c in cases] == [
        ("a", "d::2", (0,), ("z0",)), ("m", "d::1", (0,), ("a0",)), ("m", "d::1", (1,), ("r1",)),
        ("m", "d::2", (0, 0), ("b0", "b1"))]
    assert cases[3].answers == ("one", "two") and cases[3].ordering_idx == (0, 1) and cases[3].cut == (False, False)
    assert cases[0].answers == ("..." + "w" * 10,) and cases[0].cut == (True,)
