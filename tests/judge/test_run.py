"""The LLM judge, per-answer protocol (`judge.protocol=per_answer`): one call per case with all K answers,
cached verdicts, flip rates and kappa (the reference's set-level protocol: tests/judge/test_protocol.py).

Judge calls go through the real google-genai / openai SDKs to the loopback fake provider, whose reply
function grades like a judge would (same text as the reference: A, contains it: B, else C, empty: D).
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
from facet_probe.core.trials import Trial
from facet_probe.judge import (
    JudgeParseError,
    LLMJudge,
    cohens_kappa,
    judge_agreement,
    judge_run_folder,
    judge_trials,
    parse_verdicts,
    read_judgments,
    semantic_flip,
)
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]
KEY = "g-judge-test-key-0123456789"
OPENAI_KEY = "sk-judge-test-key-0123456789"
PA = "per_answer"

ITEMS = [
    make_item(
        item_id="mix::1",
        dataset="mix",
        question="What colour is the car?",
        answer_type="free",
        gold_answer="red",
    ),
    make_item(
        item_id="mix::2",
        dataset="mix",
        question="Who signed the memo?",
        answer_type="free",
        gold_answer="Ada",
    ),
    make_item(item_id="mcq::1", dataset="mcq", question="Pick one", choices=("x", "y"), gold_index=0),
]
ANSWERS = {  # (model, item) -> answers by ordering 0..3
    ("m1", "mix::1"): ["red", "Red", "red and blue", "green"],
    ("m1", "mix::2"): ["Ada", "Ada", "Ada", ""],
    ("m2", "mix::1"): ["blue", "blue", "blue", "blue"],
    ("m2", "mix::2"): ["Ada", "Bob", "Ada", "Ada"],
}
EXPECTED = {
    ("m1", "mix::1"): ["A", "B", "C"],
    ("m1", "mix::2"): ["A", "A", "D"],
    ("m2", "mix::1"): ["A", "A", "A"],
    ("m2", "mix::2"): ["C", "A", "A"],
}


def trials_frame(answers=ANSWERS) -> pd.DataFrame:
    rows = []
    for (model, item_id), outs in answers.items():
        for k, text in enumerate(outs):
            rows.append(
                {
                    "model": model,
                    "item_id": item_id,
                    "trial_key": f"{model}-{item_id}-{k}",
                    "facet": "mix",
                    "ordering_idx": k,
                    "repeat_idx": 0,
                    "raw_output": f"Answer: {text}" if text else "",
                    "answer_raw": text,
                    "parse_status": "ok" if text else "parse_error",
                    "error": None,
                }
            )
    rows.append(
        {
            "model": "m1",
            "item_id": "mcq::1",
            "trial_key": "mcq-0",
            "facet": "option_order",
            "ordering_idx": 0,
            "repeat_idx": 0,
            "raw_output": "Answer: A",
            "answer_raw": "A",
            "parse_status": "ok",
            "error": None,
        }
    )
    return pd.DataFrame(rows)


def answers_in(prompt_text: str) -> list[str]:
    return [a.strip() for a in re.findall(r"Answer \d+(?: \(reference\))?:\n(.*?)\n", prompt_text)]


def grading_judge(call) -> str:
    """A deterministic stand-in for the judge model, reading the prompt the judge really received."""
    text = call.texts()[-1]
    answers = answers_in(text)
    ref = answers[0].lower()
    verdicts = []
    for i, ans in enumerate(answers[1:], 2):
        a = ans.lower()
        v = "D" if a == "(empty)" or ref == "(empty)" else "A" if a == ref else "B" if ref in a else "C"
        verdicts.append({"answer": i, "verdict": v, "reason": f"compared {a!r} with {ref!r}"})
    out = {"verdicts": verdicts}
    gold = re.search(r"Gold answer: (.*)", text)
    if gold:
        out["gold"] = [
            {"answer": i, "matches_gold": a.lower() == gold.group(1).lower()}
            for i, a in enumerate(answers, 1)
        ]
    return "```json\n" + json.dumps(out) + "\n```"


def gemini_judge(base_url: str, **overrides):
    cfg = OmegaConf.load(ROOT / "facet_probe/conf/model/gemini_31_pro.yaml")
    cfg.base_url = base_url
    cfg.concurrency.backoff_base_s = 0.01
    for k, v in overrides.items():
        OmegaConf.update(cfg, k, v)
    return instantiate(cfg)


@pytest.fixture
def judge_key(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)


# -- parsing -----------------------------------------------------------------------------------------
def test_parse_verdicts_reads_fenced_json_and_marks_the_reference():
    text = (
        '```json\n{"verdicts": [{"answer": 2, "verdict": "b", "reason": "adds blue"},'
        ' {"answer": 3, "verdict": "C", "reason": "green"}]}\n```'
    )
    got = parse_verdicts(text, 3)
    assert [(v.answer, v.verdict, v.reason) for v in got] == [
        (1, None, "reference"),
        (2, "B", "adds blue"),
        (3, "C", "green"),
    ]


def test_parse_verdicts_falls_back_to_lines():
    got = parse_verdicts("Answer 2: A - same\nAnswer 3: (D) no answer given", 3)
    assert [v.verdict for v in got] == [None, "A", "D"]
    assert got[2].reason == "no answer given"


def test_parse_verdicts_needs_every_answer_and_reads_gold():
    with pytest.raises(JudgeParseError, match=r"\[3\]"):
        parse_verdicts('{"verdicts": [{"answer": 2, "verdict": "A"}]}', 3)
    got = parse_verdicts(
        '{"verdicts": [{"answer": 2, "verdict": "A"}], "gold": [{"answer": 1, "matches_gold":'
        ' true}, {"answer": 2, "matches_gold": false}]}',
        2,
        gold_anchored=True,
    )
    assert [v.gold_match for v in got] == [True, False]


# -- statistics --------------------------------------------------------------------------------------
def test_cohens_kappa_matches_the_textbook_example():
    # 50 cases: both yes 20, yes/no 5, no/yes 10, both no 15 -> p_o = 0.7, p_e = 0.5, kappa = 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohens_kappa(a, b) == pytest.approx(0.4)
    assert cohens_kappa(b, a) == pytest.approx(0.4)
    assert cohens_kappa(list("ABCD"), list("ABCD")) == 1.0
    assert cohens_kappa(list("AB"), list("BA")) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="same cases"):
        cohens_kappa(["A"], ["A", "B"])


def test_semantic_flip_is_the_share_of_partial_or_flip_verdicts():
    judged = pd.DataFrame({"judge": "j", "model": "m", "facet": "f", "dataset": "d", "item_id": "i",
                           "repeat_idx": 0, "verdict": [None, "A", "B", "C", "D"], "set_verdict": "D"})
    row = semantic_flip(judged).iloc[0]
    assert (row.n_A, row.n_B, row.n_C, row.n_D, row.n_judged) == (1, 1, 1, 1, 4)
    assert row.sem_flip_answers == 0.5 and row.sem_flip_set == 0.0


# -- the protocol end to end -------------------------------------------------------------------------
def test_one_call_per_model_and_item_with_all_answers_in_ordering_order(judge_key, tmp_path):
    with FakeProviderServer(reply=grading_judge) as server:
        judged = judge_trials(
            trials_frame(),
            ITEMS,
            gemini_judge(server.url),
            tmp_path / "judgments.jsonl",
            judge_name="gemini_pro",
            protocol="per_answer",
        )
        calls = list(server.calls)
    assert len(calls) == 4  # 2 models x 2 free-form items; the MCQ item is not judged
    sent = sorted(answers_in(c.texts()[-1]) for c in calls)
    assert sent == sorted([a or "(empty)" for a in outs] for outs in ANSWERS.values())
    assert all(c.model == "gemini-3.1-pro-preview" for c in calls)
    for (model, item_id), verdicts in EXPECTED.items():
        rows = judged[(judged.model == model) & (judged.item_id == item_id)].sort_values("ordering_idx")
        assert rows.verdict.fillna("ref").tolist() == ["ref", *verdicts]
        assert rows.trial_key.tolist() == [f"{model}-{item_id}-{k}" for k in range(4)]
    flips = semantic_flip(judged).set_index(["model", "item_id"]).sem_flip_answers
    assert flips[("m1", "mix::1")] == pytest.approx(2 / 3) and flips[("m2", "mix::1")] == 0.0


def test_judgments_are_cached_and_only_changed_cases_are_judged_again(judge_key, tmp_path):
    cache = tmp_path / "judgments.jsonl"
    with FakeProviderServer(reply=grading_judge) as server:
        first = judge_trials(trials_frame(), ITEMS, gemini_judge(server.url), cache, protocol=PA)
        again = judge_trials(trials_frame(), ITEMS, gemini_judge(server.url), cache, protocol=PA)
        assert len(server.calls) == 4
        changed = dict(ANSWERS)
        changed[("m2", "mix::1")] = ["blue", "blue", "navy", "blue"]
        third = judge_trials(trials_frame(changed), ITEMS, gemini_judge(server.url), cache, protocol=PA)
        assert len(server.calls) == 5
    pd.testing.assert_frame_equal(first, again)
    redone = third[(third.model == "m2") & (third.item_id == "mix::1")].sort_values("ordering_idx")
    assert redone.verdict.fillna("ref").tolist() == ["ref", "A", "C", "A"]
    assert KEY not in cache.read_text()


def test_an_unreadable_judge_reply_is_stored_as_an_error_and_retried(judge_key, tmp_path):
    cache = tmp_path / "judgments.jsonl"
    with FakeProviderServer(reply=lambda call: "They all look fine to me.") as bad:
        judged = judge_trials(trials_frame(), ITEMS, gemini_judge(bad.url), cache, protocol=PA)
    assert judged.empty and read_judgments(cache) == {}
    assert all("no verdict" in json.loads(line)["error"] for line in cache.read_text().splitlines())
    with FakeProviderServer(reply=grading_judge) as good:
        judged = judge_trials(trials_frame(), ITEMS, gemini_judge(good.url), cache, protocol=PA)
        assert len(good.calls) == 4
    assert judged.verdict.notna().sum() == 12


def test_gold_anchored_check_puts_the_gold_in_the_prompt(judge_key, tmp_path):
    with FakeProviderServer(reply=grading_judge) as server:
        judged = judge_trials(
            trials_frame(), ITEMS, gemini_judge(server.url), tmp_path / "j.jsonl", gold_anchored=True,
            protocol=PA,
        )
        assert all("Gold answer:" in c.texts()[-1] for c in server.calls)
    m1 = judged[(judged.model == "m1") & (judged.item_id == "mix::1")].sort_values("ordering_idx")
    assert m1.gold_match.tolist() == [True, True, False, False]


def test_kappa_between_two_judges_on_the_same_answers(judge_key, tmp_path):
    cache = tmp_path / "judgments.jsonl"

    def harsh_judge(call):  # calls every non-identical answer a flip
        answers = answers_in(call.texts()[-1])
        return json.dumps(
            {
                "verdicts": [
                    {"answer": i, "verdict": "A" if a == answers[0] else "C", "reason": "-"}
                    for i, a in enumerate(answers[1:], 2)
                ]
            }
        )

    with FakeProviderServer(reply=grading_judge) as g, FakeProviderServer(reply=harsh_judge) as o:
        judge_trials(trials_frame(), ITEMS, gemini_judge(g.url), cache, judge_name="gemini_pro", protocol=PA)
        cfg = OmegaConf.load(ROOT / "facet_probe/conf/model/gpt_54_mini.yaml")
        cfg.base_url = o.url + "/v1"
        judge_trials(trials_frame(), ITEMS, instantiate(cfg), cache, judge_name="gpt_54_mini", protocol=PA)
        assert o.calls[0].model == "gpt-5.4-mini"
    from facet_probe.judge import judgment_rows

    every = judgment_rows(read_judgments(cache).values())
    agreement = judge_agreement(every).iloc[0]
    rows = every[every.verdict.notna()].sort_values(["judge", "trial_key"])
    a = rows[rows.judge == "gemini_pro"].verdict.tolist()
    b = rows[rows.judge == "gpt_54_mini"].verdict.tolist()
    assert a != b and agreement.n_answers == 12
    assert agreement.kappa_answers == pytest.approx(cohens_kappa(a, b))
    assert agreement.n == 4  # cases, on the set verdicts derived from the per-answer ones


def test_judge_config_composes_a_runner_from_the_model_config(judge_key):
    from hydra import compose, initialize_config_module

    with initialize_config_module("facet_probe.conf", version_base=None):
        cfg = compose("judge_app", overrides=["input=/tmp/none", "judge=gpt_54_mini"])
    judge = instantiate(cfg.judge)
    assert isinstance(judge, LLMJudge) and judge.name == "gpt_54_mini"
    assert judge.runner.model_id == "gpt-5.4-mini" and judge.runner.name == "judge_gpt_54_mini"


def write_run_folder(run: Path) -> None:
    run.mkdir(parents=True)
    with (run / "items.jsonl").open("w") as fh:
        for item in ITEMS:
            fh.write(json.dumps(item.model_dump(mode="json")) + "\n")
    with (run / "trials.jsonl").open("w") as fh:  # as the audit app stores them
        for row in trials_frame().to_dict("records"):
            trial = Trial(
                trial_key=row["trial_key"],
                call_key="c-" + row["trial_key"],
                model=row["model"],
                facet=row["facet"],
                dataset=row["item_id"].split("::")[0],
                item_id=row["item_id"],
                ordering_idx=row["ordering_idx"],
                repeat_idx=0,
                permutation=[0],
                component_ids=["c"],
                prompt_hash="h",
                mode="direct",
                raw_output=row["raw_output"],
                answer_raw=row["answer_raw"],
                parse_status=row["parse_status"],
            )
            fh.write(trial.to_json() + "\n")


def test_cli_judges_a_run_folder_and_resumes(judge_key, tmp_path):
    run = tmp_path / "run"
    write_run_folder(run)
    with FakeProviderServer(reply=grading_judge) as server:
        done = run_module("facet_probe.judge", f"input={run}", "judge=gemini_pro", "judge.protocol=per_answer",
                       f"judge.runner.base_url={server.url}", "judge.runner.concurrency.backoff_base_s=0.01",
                       env={"GOOGLE_API_KEY": KEY}, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "mean semantic flip" in done.stdout
        assert len(server.calls) == 4
        judge = LLMJudge(name="gemini_pro", runner=gemini_judge(server.url), protocol=PA)
        judge_run_folder(run, judge)  # resumes: everything is cached
        assert len(server.calls) == 4
    flips = pd.read_csv(run / "semantic_flip.csv")
    assert len(flips) == 4 and set(flips.columns) >= {"sem_flip_set", "sem_flip_answers", "n_A", "n_B", "n_C"}
    for name in ("judgments.jsonl", "judgments.csv"):
        assert KEY not in (run / name).read_text()
    assert not (run / ".hydra").exists()
