"""`attack/loop=reference` against a port of the reference's loop (aiPenguin/StopReasoning `utils/Attacker.py`,
`Attacker.pgd_attack`), and each of its rules alone against the project's loop (`attack.loop`, docs/attacks.md).

`reference_pgd` below follows `pgd_attack`'s control flow line by line (its iteration count, when the pseudo-target
is regenerated, when the rationale attack's reference distribution is retaken, the per-iteration early stop on the
teacher-forced argmax text) on our model calls, objectives and pixel box: the loss and step mechanics are shared on
purpose, the loop is not.
"""

from __future__ import annotations

import pytest
import torch
from helpers import ScriptedAdapter, attack_settings, samples

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.loop import LoopRules
from facet_probe.attack.objectives import StopReasoningObjective
from facet_probe.attack.pgd import run_pgd, sample_seed
from facet_probe.attack.pixels import PixelBox
from facet_probe.attack.tables import summarize, summary_line

REFERENCE = LoopRules(name="reference", last_iteration="loss_only", refresh_image="before_step",
                      kl_reference="refresh", early_stop_check="forced_argmax", stop_on_update=True,
                      success="wrong_answer")


def reference_pgd(adapter, sample, reply, objective, eps, alpha, iters, update, *, seed=0, finish_all_iter=False,
                  stop_on_update=True, max_new=16):
    """`Attacker.pgd_attack` (+ `attack`'s reference on the clean image) for one sample: its losses (our sign),
    final image and messages (each refresh, then the final reply unless it repeats the last)."""
    enc = adapter.encode(sample.prompt)
    prompt = enc.prompt_only()
    box = PixelBox(enc.images01, eps)
    adv = box.random_start(torch.Generator().manual_seed(sample_seed(seed, sample.sample_id)))

    def generate(image):  # `wo_attack`: a greedy reply on `image`
        with torch.no_grad():
            return adapter.generate_text(prompt, adapter.pixel_inputs(image), max_new)

    def forward(forced, image):  # `forward`: logits at the objective's rows and at every reply row
        start, end = forced.encoded.target_span
        reply_pos = list(range(start - 1, end - 1))
        wanted = sorted(set(forced.positions) | set(reply_pos))
        logits = adapter.forward_logits(forced.encoded, adapter.pixel_inputs(image), wanted)
        at = {p: r for r, p in enumerate(wanted)}
        return logits[[at[p] for p in forced.positions]], logits[[at[p] for p in reply_pos]]

    def get_reference(text, image):  # `get_reference`: the pseudo-target and its rationale log-probs on `image`
        forced = objective.prepare(adapter, sample, text)
        if objective.needs_reference and forced.rationale_rows:
            with torch.no_grad():
                rows, _ = forward(forced, image)
            forced.reference = torch.log_softmax(rows[forced.rationale_rows].float(), dim=-1)
        return forced

    forced = get_reference(reply, box.clean)
    losses, messages, stop_flag = [], [], False
    for i in range(iters):
        x = [t.clone().requires_grad_(True) for t in adv]
        rows, reply_rows = forward(forced, x)
        answer = sample.read(adapter.tokenizer.decode(reply_rows.argmax(-1).tolist())).answer
        if answer is None:
            break  # "not found answer in {text}"
        loss, _ = objective.loss(forced, rows, sample)
        losses.append(float(loss.detach()))
        grad = torch.autograd.grad(loss, x)
        if i == iters - 1:
            break
        if answer != sample.gold and not finish_all_iter:
            stop_flag = True
            if not stop_on_update:
                break
        if (i + 1) % update == 0 and i != 0:
            message = generate(adv)
            messages.append(message)
            read = sample.read(message)
            if isinstance(objective, StopReasoningObjective) and not read.answer_first and read.answer is not None:
                stop_flag = False
            if stop_flag:
                break
            forced = get_reference(message if objective.follows_pseudo_target else reply, adv)
        adv = box.step(adv, grad, alpha)
    final = generate(adv)
    if not messages or final != messages[-1]:
        messages.append(final)
    return losses, adv, messages


def ours(adapter, sample, reply, settings, on_step=None):
    (result,) = run_pgd(adapter, [sample], [reply], settings.objective, settings, ops=ModelOps(adapter, 1),
                        max_new_tokens=16, seed=0, on_step=on_step)
    return result


def clean_reply(runner, sample):
    with torch.no_grad():
        enc = runner.encode(sample.prompt)
        return runner.generate_text(enc, runner.pixel_inputs(enc.images01), 16)


@pytest.mark.slow  # 1-2 s each: 2 samples x 20 iterations with refreshes
@pytest.mark.parametrize("name", ["answer", "rationale", "stop_reasoning"])
def test_the_reference_loop_is_bit_equal_to_a_port_of_pgd_attack(answering, name):
    """Losses, final images and every regenerated reply agree bit for bit; the samples stop at a refresh with a
    pending stop (answer, rationale), or run all 20 iterations with 19 updates (stop-reasoning replies that still
    reason clear the stop)."""
    torch.set_num_threads(1)
    s = attack_settings(name, eps=16 / 255, alpha=1 / 255, steps=20, update_every=5, quantize=False, loop=REFERENCE)
    stops = []
    for sample in samples(2):
        reply = clean_reply(answering, sample)
        losses, adv, messages = reference_pgd(answering, sample, reply, s.objective, s.eps, s.alpha, 20, 5)
        r = ours(answering, sample, reply, s)
        assert r.curve["loss"] == losses and r.steps_run == len(losses)
        assert torch.equal(r.adv_images[0], adv[0])
        replies = [t for _, t in r.pseudo_targets]
        assert [*replies, *([] if replies and replies[-1] == r.final.text else [r.final.text])] == messages
        stops.append((r.steps_run, r.updates))
    assert any(steps < 20 for steps, _ in stops)  # early stops happened (at refreshes, with --stop_on_update)
    if name == "stop_reasoning":
        assert (20, 19) in stops  # the last iteration records its loss and does not step


def test_our_loop_differs_from_the_port_where_it_should(answering):
    """Early stop off (the review's setting). Without refreshes the two agree bit for bit on 12 losses, and ours
    makes a 12th update where the reference stops at 11; with refreshes every 4, ours regenerates on x_4, x_8, x_12
    (the reference on x_3, x_7) and keeps the clean image's KL reference where the reference's restarts."""
    torch.set_num_threads(1)
    (sample,) = samples(1)
    reply = clean_reply(answering, sample)
    s = attack_settings("answer", eps=16 / 255, alpha=1 / 255, steps=12, update_every=100, quantize=False,
                        early_stop=False)
    losses, adv, _ = reference_pgd(answering, sample, reply, s.objective, s.eps, s.alpha, 12, 100, finish_all_iter=True)
    seen = {}
    r = ours(answering, sample, reply, s, on_step=lambda t, states: seen.update({t: states[0].adv[0].clone()}))
    assert r.curve["loss"] == losses and (r.steps_run, r.updates) == (12, 12)
    assert torch.equal(seen[11], adv[0]) and not torch.equal(r.adv_images[0], adv[0])
    s = attack_settings("rationale", eps=16 / 255, alpha=1 / 255, steps=12, update_every=4, quantize=False,
                        early_stop=False)
    losses, adv, _ = reference_pgd(answering, sample, reply, s.objective, s.eps, s.alpha, 12, 4, finish_all_iter=True)
    r = ours(answering, sample, reply, s)
    assert [t for t, _ in r.pseudo_targets] == [4, 8, 12]
    assert r.curve["loss"][:4] == losses[:4] and r.curve["loss"][4] != losses[4]  # the KL reference differs


# --- each rule alone, on the scripted double (helpers.ScriptedAdapter) -------------------------------------------


class ArgmaxScript(ScriptedAdapter):
    """A scripted double whose teacher-forced argmax text at its n-th forward with gradient is `argmax(n)`."""

    def __init__(self, tokenizer, replies, argmax) -> None:
        super().__init__(tokenizer, replies)
        self.argmax = argmax
        self.iterations = 0

    def forward_logits(self, encoded, pixel_inputs, positions):
        out = super().forward_logits(encoded, pixel_inputs, positions)
        if not torch.is_grad_enabled():
            return out
        ids = self.tokenizer(self.argmax(self.iterations), add_special_tokens=False)["input_ids"]
        self.iterations += 1
        pad = self.tokenizer(" .", add_special_tokens=False)["input_ids"][-1]
        start = encoded.target_span[0]
        bump = torch.zeros_like(out)
        for r, p in enumerate(positions):
            k = p + 1 - start
            bump[r, ids[k] if k < len(ids) else pad] = 1e4
        return out + bump


def correct(gold, rationale="It is red."):
    return f"{rationale} The answer is ({gold})."


def wrong(gold, rationale="It is red."):
    return f"{rationale} The answer is ({'A' if gold != 'A' else 'B'})."


def attack(llava, replies, name="answer", argmax=None, steps=10, update_every=3, **kw):
    """One sample attacked on the scripted double: (adapter, result, {updates: (image, forced text)})."""
    (sample,) = samples(1)
    adapter = (ScriptedAdapter(llava.tokenizer, replies) if argmax is None
               else ArgmaxScript(llava.tokenizer, replies, argmax))
    s = attack_settings(name, eps=8 / 255, alpha=1 / 255, steps=steps, update_every=update_every, **kw)
    seen = {}
    (res,) = run_pgd(adapter, [sample], [correct(sample.gold)], s.objective, s, ops=ModelOps(adapter, 4), seed=0,
                     on_step=lambda t, st: seen.update({t: (st[0].box.quantize(st[0].adv)[0], st[0].forced.text)}))
    return adapter, res, seen


def test_point9_loss_only_makes_one_update_fewer_than_the_iterations(llava):
    (gold,) = [s.gold for s in samples(1)]
    for rules, updates in ((LoopRules(), 10), (LoopRules(last_iteration="loss_only"), 9), (REFERENCE, 9)):
        adapter, res, seen = attack(llava, lambda i, x: correct(gold), argmax=lambda n: correct(gold), update_every=20,
                                    early_stop=False, loop=rules)
        assert res.steps_run == len(res.curve["loss"]) == 10 and res.updates == updates and max(seen) == updates
        assert torch.equal(adapter.generated_on[-1][0], seen[updates][0])  # the final reply sees the last image


def test_point10_the_reference_refreshes_on_the_image_before_the_step(llava):
    (gold,) = [s.gold for s in samples(1)]
    round_ = correct(gold, "Round.")
    for rules, refreshed in ((LoopRules(), [3, 6, 9]), (LoopRules(refresh_image="before_step"), [2, 5, 8])):
        adapter, res, seen = attack(llava, lambda i, x: round_, early_stop=False, loop=rules)
        assert [t for t, _ in res.pseudo_targets] == refreshed
        assert torch.equal(adapter.generated_on[0][0], seen[refreshed[0]][0])  # x_2 (reference) or x_3 (ours)
        # the new pseudo-target is forced from the next forward on, x_3 in both loops
        assert seen[3][1] == (round_ if refreshed[0] == 2 else correct(gold)) and seen[4][1] == round_


def test_point11_the_reference_retakes_the_kl_reference_on_every_refresh_image(llava):
    (gold,) = [s.gold for s in samples(1)]
    for rules, references in ((LoopRules(), 1), (LoopRules(kl_reference="refresh"), 1 + 3)):
        adapter, res, _ = attack(llava, lambda i, x: correct(gold), name="rationale", early_stop=False,
                                 quantize=False, loop=rules)
        assert adapter.forward_calls == 10 + references  # the reply never changes: ours keeps its clean reference
        kl = res.curve["kl"]
        assert kl[2] > 0 and (kl[3] == 0) == (references > 1)  # x_3 is the refresh image: KL restarts at 0


def test_point12_the_reference_stops_on_the_teacher_forced_argmax_answer(llava):
    (gold,) = [s.gold for s in samples(1)]
    other = "A" if gold != "A" else "B"
    wrong_from_4 = lambda n: f"The answer is ({gold if n < 4 else other})."  # noqa: E731
    argmax_rule = {"early_stop_check": "forced_argmax"}
    cases = [  # (rules, argmax script, steps_run, updates, stopped early); the refresh replies stay correct
        (LoopRules(), wrong_from_4, 10, 10, False),  # ours: only the refresh replies count
        (LoopRules(**argmax_rule), wrong_from_4, 5, 4, True),  # a wrong argmax answer stops at once, before the step
        (LoopRules(**argmax_rule, stop_on_update=True, refresh_image="before_step"), wrong_from_4,
         6, 5, True),  # ... or at the next refresh (iteration 5)
        (LoopRules(**argmax_rule), lambda n: "It is red." if n == 4 else wrong_from_4(0), 4, 4, True),  # no answer
    ]
    for rules, argmax, steps_run, updates, early in cases:
        adapter, res, _ = attack(llava, lambda i, x: correct(gold), argmax=argmax, loop=rules)
        assert (res.steps_run, res.updates, res.stopped_early) == (steps_run, updates, early), rules
    # no answer in the argmax text ends the attack even with early_stop=false (the reference has no letter then)
    _, res, _ = attack(llava, lambda i, x: correct(gold), argmax=lambda n: "It is red." if n == 4 else wrong_from_4(0),
                       early_stop=False, loop=LoopRules(**argmax_rule))
    assert (res.steps_run, res.updates) == (4, 4)
    # stop-reasoning: a refresh whose reply still reasons (and answers) clears the pending stop; one that answers
    # first does not
    rules = LoopRules(**argmax_rule, stop_on_update=True, refresh_image="before_step")
    for reply, steps_run in ((correct(gold), 10), (f"The answer is ({other}).", 6)):
        _, res, _ = attack(llava, lambda i, x, reply=reply: reply, name="stop_reasoning", argmax=wrong_from_4,
                           loop=rules)
        assert res.steps_run == steps_run


def test_point13_success_by_the_references_rule_and_the_summary_line_gives_both(llava):
    (gold,) = [s.gold for s in samples(1)]
    for rules, success in ((LoopRules(), False), (LoopRules(success="wrong_answer"), True)):
        _, res, _ = attack(llava, lambda i, x: wrong(gold), name="stop_reasoning", steps=2, loop=rules)
        assert not res.final.answer_first and res.success is success and res.reference_success
    rows = [{"selected": True, "selection_reason": "correct", "clean_correct": True, "attacked": True,
             "adv_correct": False, "adv_answer": "A", "target": None, "success": False, "rationale_changed": True,
             "adv_answer_first": False, "clean_answer_first": False, "linf_255": 16, "steps_run": 200},
            {"selected": True, "selection_reason": "correct", "clean_correct": True, "attacked": True,
             "adv_correct": True, "adv_answer": "B", "target": None, "success": False, "rationale_changed": False,
             "adv_answer_first": False, "clean_answer_first": False, "linf_255": 16, "steps_run": 200}]
    meta = {"attack": "stop_reasoning", "mode": "cot", "success_rule": "a wrong answer given in the first sentence"}
    summary = summarize(rows, meta)
    assert (summary["successes"], summary["reference_successes"], summary["reference_success_rate"]) == (0, 1, 0.5)
    assert summary_line(summary) == (
        "clean accuracy 100.0%, after attack 50.0%; attacks succeeded: 0/2 by a wrong answer given in the first "
        "sentence, 1/2 by a wrong answer (the reference's rule, 1 - accuracy; targeted: the target letter)")


def test_attack_loop_reference_declares_the_references_rules_and_names_its_budget_folder():
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from facet_probe.attack.config import AttackSettings, register
    from facet_probe.core.errors import ConfigError

    register()
    GlobalHydra.instance().clear()
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        default, reference, wrong = (compose("attack_app", overrides=o) for o in (
            [], ["attack/loop=reference"], ["attack.loop=reference"]))
    GlobalHydra.instance().clear()
    assert AttackSettings.from_config(default.attack).loop == LoopRules()
    assert AttackSettings.from_config(reference.attack).loop == REFERENCE
    assert "/eps16-a1-s200-u10/" in default.run_name and "/eps16-a1-s200-u10-loop_reference/" in reference.run_name
    with pytest.raises(ConfigError, match="choose it with attack/loop=reference"):
        AttackSettings.from_config(wrong.attack)
