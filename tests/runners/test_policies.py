"""Reference policies (simulators): answers in the instructed form, exactly as their definitions say,
reproducible per request key."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from facet_probe.audit.plan import policy_hints
from facet_probe.core.permutations import sample_permutations
from facet_probe.core.prompts import AnswerFormat, Message, Prompt, PromptMode, TextPart
from facet_probe.datasets.synthetic import SYNTHETIC_SETS
from facet_probe.runners.base import Request, Runner, RunnerError, generate_all
from facet_probe.runners.policies import (
    POLICIES,
    AlwaysFirstPolicy,
    OraclePolicy,
    PositionBiasedPolicy,
    SeededRandomPolicy,
)
from facet_probe.scoring.parsing import ParseStatus, parse_free, parse_letter
from facet_probe.scoring.score import score

CONF = Path(__file__).resolve().parents[2] / "facet_probe" / "conf"
LABELS = ("A", "B", "C", "D")


def prompt(mode=PromptMode.DIRECT, labels=LABELS, fmt=AnswerFormat.LETTER) -> Prompt:
    return Prompt(system="s", messages=(Message("user", (TextPart("Which one?"),)),), mode=mode,
                  answer_format=fmt, labels=labels)


def request(key="k", mode=PromptMode.DIRECT, gold="C", first="A", **kw) -> Request:
    return Request(key=key, prompt=prompt(mode, **kw), metadata={"gold": gold, "first": first})


def answers(policy, requests) -> dict[str, str]:
    return {k: r.text for k, r in generate_all(policy, requests).items()}


@pytest.mark.parametrize("cls", list(POLICIES.values()))
def test_every_policy_is_a_runner_that_needs_nothing(cls):
    policy = cls()
    assert isinstance(policy, Runner)
    policy.check_ready()
    policy.close()
    assert policy.fingerprint()["policy"] == cls.policy and policy.name == cls.policy


def test_direct_and_cot_replies_use_the_instructed_form():
    direct = OraclePolicy().answer(request()).text
    cot = OraclePolicy().answer(request(mode=PromptMode.COT)).text
    assert direct == "Answer: C"
    assert cot.endswith("The answer is (C).") and len(cot) > len("The answer is (C).") + 10
    assert parse_letter(direct, LABELS, PromptMode.DIRECT).status == ParseStatus.OK
    assert parse_letter(cot, LABELS, PromptMode.COT).answer == "C"
    free = OraclePolicy().answer(request(mode=PromptMode.COT, gold="Oslo", labels=(), fmt=AnswerFormat.FREE))
    assert parse_free(free.text, PromptMode.COT).answer == "Oslo"


def test_oracle_answers_the_gold_and_always_first_the_first():
    reqs = [request(key=str(i), gold=g, first=f) for i, (g, f) in enumerate([("B", "A"), ("D", "A"), ("A", "A")])]
    assert list(answers(OraclePolicy(), reqs).values()) == ["Answer: B", "Answer: D", "Answer: A"]
    assert set(answers(AlwaysFirstPolicy(), reqs).values()) == {"Answer: A"}


def test_missing_hints_fail_loudly():
    bare = Request(key="k", prompt=prompt())
    with pytest.raises(RunnerError, match=r"metadata\['gold'\]"):
        OraclePolicy().answer(bare)
    with pytest.raises(RunnerError, match=r"metadata\['first'\]"):
        AlwaysFirstPolicy().answer(bare)


def test_seeded_random_is_uniform_over_labels_and_reproducible_per_key():
    reqs = [request(key=f"key-{i}") for i in range(2000)]
    first = answers(SeededRandomPolicy(seed=3), reqs)
    assert answers(SeededRandomPolicy(seed=3), list(reversed(reqs))) == first
    assert answers(SeededRandomPolicy(seed=4), reqs) != first
    counts = {label: sum(t == f"Answer: {label}" for t in first.values()) for label in LABELS}
    assert all(400 < c < 600 for c in counts.values()), counts


def test_seeded_random_on_free_form_draws_from_the_given_candidates_or_refuses():
    free = Request(key="k", prompt=prompt(labels=(), fmt=AnswerFormat.FREE),
                   metadata={"gold": "Oslo", "first": "Rome", "candidates": ["Oslo", "Rome", "Lima"]})
    assert SeededRandomPolicy().answer(free).text in {"Answer: Oslo", "Answer: Rome", "Answer: Lima"}
    with pytest.raises(RunnerError, match="candidates"):
        SeededRandomPolicy().answer(request(labels=(), fmt=AnswerFormat.FREE))


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_position_biased_picks_first_with_probability_p_else_gold(p):
    reqs = [request(key=f"key-{i}", gold="C", first="A") for i in range(2000)]
    out = answers(PositionBiasedPolicy(p=p), reqs)
    assert set(out.values()) <= {"Answer: A", "Answer: C"}
    share_first = sum(t == "Answer: A" for t in out.values()) / len(out)
    assert abs(share_first - p) < 0.04
    assert answers(PositionBiasedPolicy(p=p), reqs) == out


def test_fingerprints_carry_every_parameter():
    a, b, c = PositionBiasedPolicy(p=0.5), PositionBiasedPolicy(p=0.6), PositionBiasedPolicy(p=0.5, seed=1)
    assert a.fingerprint() != b.fingerprint() != c.fingerprint() != a.fingerprint()
    assert a.fingerprint() == PositionBiasedPolicy(name="renamed", p=0.5).fingerprint()
    with pytest.raises(ValueError, match=r"p must be a probability"):
        PositionBiasedPolicy(p=1.5)


def test_simulated_latency_delays_calls_but_changes_no_answer_or_fingerprint():
    slow, fast = SeededRandomPolicy(latency_s=0.01), SeededRandomPolicy()
    reqs = [request(key=str(i)) for i in range(5)]
    t0 = time.perf_counter()
    slow_out = generate_all(slow, reqs)
    assert time.perf_counter() - t0 >= 0.05
    assert {k: r.text for k, r in slow_out.items()} == answers(fast, reqs)
    assert all(r.latency_s == 0.01 for r in slow_out.values())
    assert slow.fingerprint() == fast.fingerprint()


@pytest.mark.parametrize("config", ["oracle", "always_first", "seeded_random", "position_biased"])
def test_model_configs_build_their_policy(config):
    cfg = yaml.safe_load((CONF / "model" / f"{config}.yaml").read_text())
    module, cls = cfg.pop("_target_").rsplit(".", 1)
    policy = getattr(importlib.import_module(module), cls)(**cfg)
    assert policy.name == config and policy.policy == config


def _facet(name: str):
    target = yaml.safe_load((CONF / "facet" / f"{name}.yaml").read_text())["_target_"]
    module, cls = target.rsplit(".", 1)
    return getattr(importlib.import_module(module), cls)()


@pytest.mark.parametrize("name", sorted(SYNTHETIC_SETS))
@pytest.mark.parametrize("mode", [PromptMode.DIRECT, PromptMode.COT])
def test_on_synthetic_items_oracle_scores_correct_and_always_first_answers_the_first_shown(name, mode):
    """End to end through the real facet, the audit's hints and the scorer."""
    cls = SYNTHETIC_SETS[name]
    facet = _facet(cls.facets[0])
    for item in cls(name=name, n=6).load():
        n = len(facet.orderables(item))
        for perm in sample_permutations(n, k=3, item_id=item.item_id):
            shown = facet.render(item, perm, mode)
            plan = SimpleNamespace(item=item, facet=facet, row=SimpleNamespace(permutation=perm), prompt=shown)
            req = Request(key=f"{item.item_id}/{perm}", prompt=shown, metadata=policy_hints(plan))
            oracle = score(item, facet, perm, shown, OraclePolicy().answer(req).text)
            assert oracle.correct and oracle.parse_status == ParseStatus.OK
            first = score(item, facet, perm, shown, AlwaysFirstPolicy().answer(req).text)
            assert first.parse_status == ParseStatus.OK
            if item.choices:
                assert first.answer_raw == shown.labels[0]
                assert first.correct == (facet.choice_order(item, perm)[0] == item.gold_index)
            else:
                shown_first = facet.orderables(item)[perm[0]]
                assert req.metadata["first"] == shown_first.metadata["answer"]
                assert first.correct == (shown_first.metadata["answer"] == item.gold)
