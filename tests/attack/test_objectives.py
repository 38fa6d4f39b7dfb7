"""Each objective moves its loss the intended way over PGD steps, on two tiny model families."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import attack_settings, samples

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.pgd import run_pgd

# the pseudo-target stays fixed (no refresh before the end, no early stop): only the image moves
CASES = [  # (attack, settings, component, direction)
    ("answer", {}, "answer_ce", +1),  # CE of the gold letter goes up
    ("answer", {"targeted": "next"}, "target_ce", -1),  # CE of the chosen wrong letter goes down
    ("rationale", {"answer_weight": 0.0}, "kl", +1),  # clean vs adversarial distributions drift apart
    ("rationale", {}, "loss", -1),
    ("stop_reasoning", {"answer_weight": 0.0}, "template_ce", -1),  # "The answer is (" becomes likelier
    ("stop_reasoning", {}, "loss", -1),
]


def curves(runner, name, extra, n=2):
    s = attack_settings(name=name, eps=32 / 255, alpha=2 / 255, steps=12, update_every=100, early_stop=False,
                       **{k: v for k, v in extra.items() if k != "targeted"})
    target = extra.get("targeted")
    batch = samples(n)
    if target:
        batch = [replace(b, target=b.labels[(b.labels.index(b.gold) + 1) % len(b.labels)]) for b in batch]
    s = replace(s, targeted=target)
    replies = [f"It is round and red. The answer is ({b.gold})." for b in batch]
    results = run_pgd(runner, batch, replies, s.objective, s, ops=ModelOps(runner, n), max_new_tokens=4)
    assert all(r.error is None for r in results)
    return [r.curve for r in results]


@pytest.mark.parametrize("family", ["llava", "qwen"])
@pytest.mark.parametrize(("name", "extra", "component", "direction"), CASES)
def test_the_objective_moves_its_loss_the_intended_way(request, family, name, extra, component, direction):
    runner = request.getfixturevalue(family)
    for curve in curves(runner, name, extra):
        ys = curve[component]
        assert len(ys) == 12
        assert direction * (ys[-1] - ys[0]) > 0, (component, ys)
        assert curve["loss"][-1] < curve["loss"][0]  # PGD minimises the objective's loss
