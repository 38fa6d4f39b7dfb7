"""Shared builders of the attack tests: samples from synthetic items and a scripted test double."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

import torch

from facet_probe.attack.config import AttackSettings
from facet_probe.attack.objectives import AnswerObjective, RationaleObjective, Sample, StopReasoningObjective
from facet_probe.attack.outputs import sample_ids
from facet_probe.core.prompts import PromptMode
from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ
from facet_probe.facets.option_order import OptionOrder
from facet_probe.runners.hf.base import Encoded

BUILT_IN = {"answer": AnswerObjective, "rationale": RationaleObjective, "stop_reasoning": StopReasoningObjective}


def attack_settings(name: str = "answer", **kw) -> AttackSettings:
    """Settings of a built-in attack: keywords that are the objective's settings go to it, the rest to PGD."""
    cls = BUILT_IN.get(name)
    own = {f.name for f in fields(cls)} if cls else set()
    objective = cls(**{k: v for k, v in kw.items() if k in own}) if cls else None
    return AttackSettings(name=name, objective=objective, **{k: v for k, v in kw.items() if k not in own})


def samples(n: int = 3, mode: PromptMode = PromptMode.COT, target: str | None = None) -> list[Sample]:
    items = SyntheticVisualMCQ(name="synthetic_visual_mcq", n=n, seed=42).load()
    ids = sample_ids([it.item_id for it in items])
    out = []
    for it in items:
        p = OptionOrder().render(it, list(range(len(it.choices))), mode)
        out.append(Sample(ids[it.item_id], it.item_id, p, p.labels, p.labels[it.gold_index], target))
    return out


class ScriptedAdapter:
    """The attack interface on a toy differentiable model whose greedy replies follow a script.

    `replies(call_index, images01)` gives the reply of the n-th `generate_text` call (0-based); the logits
    are a fixed random table plus a linear function of the pixels, so gradients reach the image. It has
    no batched collation, so `ModelOps` calls it one prompt at a time (every call is counted)."""

    name = "scripted"

    def __init__(self, tokenizer, replies: Callable[[int, list[torch.Tensor]], str], size: int = 8) -> None:
        self.tokenizer = tokenizer
        self.replies = replies
        gen = torch.Generator().manual_seed(0)
        vocab = len(tokenizer)
        self.table = torch.randn(vocab, vocab, generator=gen)
        self.pixel_weight = torch.randn(3 * size * size, vocab, generator=gen)
        self.image = torch.rand(3, size, size, generator=gen)
        self.generate_calls = 0
        self.forward_calls = 0
        self.generated_on: list[torch.Tensor] = []

    input_device = torch.device("cpu")

    def encode(self, prompt, target_text=None) -> Encoded:
        ids = torch.tensor(self.tokenizer("Question: which one?", add_special_tokens=False)["input_ids"])
        enc = Encoded(ids, [self.image.clone()], {}, len(ids), None, prompt.hash)
        if target_text is not None:
            t = torch.tensor(self.tokenizer(target_text, add_special_tokens=False)["input_ids"])
            enc.input_ids = torch.cat([ids, t])
            enc.target_span = (len(ids), len(ids) + len(t))
        return enc

    def pixel_inputs(self, images01):
        return {"pixel_values": torch.stack(list(images01))}

    def forward_logits(self, encoded, pixel_inputs, positions):
        self.forward_calls += 1
        pos = torch.as_tensor(list(positions))
        x = pixel_inputs["pixel_values"].reshape(-1)
        return self.table[encoded.input_ids[pos]] + (x @ self.pixel_weight)[None, :] * (1 + pos[:, None] % 3)

    def generate_text(self, encoded, pixel_inputs, max_new_tokens):
        reply = self.replies(self.generate_calls, list(pixel_inputs["pixel_values"]))
        self.generate_calls += 1
        self.generated_on.append(pixel_inputs["pixel_values"].clone())
        return reply
