"""The PGD driver: refresh schedule, early stop, the pseudo-target it forces, the feasible set, counted calls."""

from __future__ import annotations

import pytest
import torch
from helpers import ScriptedAdapter, attack_settings, samples

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.config import AttackSettings
from facet_probe.attack.pgd import run_pgd


def settings(name="answer", **kw) -> AttackSettings:
    return attack_settings(name=name, **{"eps": 8 / 255, "alpha": 1 / 255, "steps": 10, "update_every": 3, **kw})


def attack(llava, replies, s: AttackSettings, clean=None, n=1):
    adapter = ScriptedAdapter(llava.tokenizer, replies)
    batch = samples(n)
    seen = []
    on_step = lambda t, states: seen.append((t, [(st.sample.sample_id, [x.clone() for x in st.adv],  # noqa: E731
                                                  st.box, st.forced.text) for st in states]))
    clean = clean or [f"It is red. The answer is ({b.gold})." for b in batch]
    results = run_pgd(adapter, batch, clean, s.objective, s, ops=ModelOps(adapter, 4), seed=0,
                      on_step=on_step)
    return adapter, results, seen


def correct(gold, rationale="It is red."):
    return f"{rationale} The answer is ({gold})."


def wrong(gold, rationale="It is red."):
    return f"{rationale} The answer is ({'A' if gold != 'A' else 'B'})."


@pytest.mark.parametrize(("steps", "calls"), [(10, 4), (9, 3), (2, 1), (0, 1)])
def test_refresh_every_update_every_steps_and_one_final_generation(llava, steps, calls):
    (gold,) = [s.gold for s in samples(1)]
    adapter, (res,), seen = attack(llava, lambda i, x: correct(gold), settings(steps=steps))
    assert adapter.generate_calls == calls  # refreshes at 3, 6, 9 (+ a final one unless step `steps` refreshed)
    assert [step for step, _ in res.pseudo_targets] == [t for t in (3, 6, 9) if t <= steps]
    assert res.refreshes == len(res.pseudo_targets) and res.steps_run == steps and not res.stopped_early
    assert res.success is False and res.final.correct
    assert len(res.curve.get("loss", [])) == steps and adapter.forward_calls == steps


def test_refresh_generates_on_the_current_quantised_adversarial_image(llava):
    (gold,) = [s.gold for s in samples(1)]
    adapter, (res,), seen = attack(llava, lambda i, x: correct(gold), settings(steps=6))
    for call, step in enumerate((3, 6)):
        (_, adv, box, _), = seen[step - 1][1]
        assert torch.equal(adapter.generated_on[call][0], box.quantize(adv)[0])
    assert torch.equal(res.adv_images[0], adapter.generated_on[-1][0])  # the saved image is the evaluated one


def test_a_sample_stops_at_the_first_refresh_that_meets_the_criteria(llava):
    (gold,) = [s.gold for s in samples(1)]
    script = lambda i, x: correct(gold) if i == 0 else wrong(gold)  # noqa: E731
    adapter, (res,), seen = attack(llava, script, settings())
    assert res.steps_run == 6 and res.stopped_early and res.success and adapter.generate_calls == 2
    assert [t for t, _ in seen] == [1, 2, 3, 4, 5, 6]
    adapter, (res,), _ = attack(llava, script, settings(early_stop=False))
    assert res.steps_run == 10 and not res.stopped_early and res.success and adapter.generate_calls == 4


def test_stop_reasoning_stops_only_when_the_wrong_answer_comes_first(llava):
    (gold,) = [s.gold for s in samples(1)]
    replies = [wrong(gold), wrong(gold, "Blue."), "The answer is (A)." if gold != "A" else "The answer is (B)."]
    script = lambda i, x: replies[min(i, 2)]  # noqa: E731
    adapter, (res,), seen = attack(llava, script, settings("stop_reasoning", steps=12))
    assert res.steps_run == 9 and res.stopped_early and res.success and res.final.answer_first
    # the reference's form forces the model's own reply: the clean one, then each refreshed one
    forced = {t: rows[0][3] for t, rows in seen}
    assert forced[1] == forced[3] == correct(gold) and forced[4] == forced[6] == wrong(gold)
    assert forced[7] == forced[9] == wrong(gold, "Blue.")
    _, (res,), seen = attack(llava, script, settings("stop_reasoning", steps=12, sequence="template"))
    assert res.steps_run == 9 and res.success
    assert {text for _, rows in seen for (_, _, _, text) in rows} == {f"The answer is ({gold})."}  # the template
    adapter, (res,), _ = attack(llava, lambda i, x: wrong(gold), settings("answer"))
    assert res.steps_run == 3 and res.success  # the answer attack is satisfied by any wrong answer


def test_the_forced_sequence_follows_the_latest_reply_with_an_answer(llava):
    (gold,) = [s.gold for s in samples(1)]
    replies = [correct(gold, "Round."), "No idea.", correct(gold, "Square.")]
    adapter, (res,), seen = attack(llava, lambda i, x: replies[min(i, 2)], settings(steps=10, early_stop=False))
    forced = {t: rows[0][3] for t, rows in seen}
    assert forced[1] == forced[3] == correct(gold)  # the clean reply until the first refresh (after step 3)
    assert forced[4] == forced[6] == correct(gold, "Round.")
    assert forced[7] == correct(gold, "Round.")  # a reply without an answer keeps the previous target
    assert forced[10] == correct(gold, "Square.")


def test_the_rationale_attack_recomputes_clean_references_only_for_new_pseudo_targets(llava):
    (gold,) = [s.gold for s in samples(1)]
    adapter, (res,), _ = attack(llava, lambda i, x: correct(gold), settings("rationale", steps=9, early_stop=False))
    assert adapter.forward_calls == 9 + 1  # steps + the clean reference once (the reply never changed)
    replies = [correct(gold, "Round."), correct(gold, "Square."), correct(gold, "Square.")]
    adapter, (res,), _ = attack(llava, lambda i, x: replies[i], settings("rationale", steps=9, early_stop=False))
    assert adapter.forward_calls == 9 + 1 + 2  # + one per new pseudo-target (the last refresh is the final one)
    assert res.curve["kl"][0] > 0  # the random start already moves the distribution


@pytest.mark.parametrize("name", ["answer", "rationale", "stop_reasoning"])
def test_every_step_stays_in_the_eps_ball_and_in_unit_range(llava, name):
    gold = [s.gold for s in samples(3)]
    adapter, results, seen = attack(llava, lambda i, x: correct("A"), settings(name, eps=4 / 255, alpha=3 / 255,
                                                                              early_stop=False), n=3)
    assert len(seen) == 10 and all(len(rows) == 3 for _, rows in seen)
    for _, rows in seen:
        for _, adv, box, _ in rows:
            assert box.contains(adv) and box.linf(adv) <= 4 / 255 + 1e-6
            assert float(adv[0].min()) >= 0 and float(adv[0].max()) <= 1
    for res in results:
        assert res.linf <= 4 / 255 + 1e-6 and res.linf > 3 / 255
    assert len(gold) == 3


def test_a_clean_reply_without_a_locatable_answer_is_not_attacked(llava):
    adapter, (res,), seen = attack(llava, lambda i, x: "x", settings(), clean=["I cannot see."])
    assert res.error and "no locatable answer" in res.error and seen == [] and res.final is None
    assert adapter.generate_calls == 0
