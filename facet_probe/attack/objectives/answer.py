"""Answer attack: make the answer letter wrong.

Loss (minimised) = ``-answer_weight * CE(logits at the letter slot, gold letter)``; the targeted variant
(``attack.targeted=next|random``) minimises ``CE(..., target letter)`` instead. The slot is the answer
letter's token in the current pseudo-target (``... The answer is (X).`` or ``Answer: X``). Success: the
answer is no longer the correct one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from facet_probe.attack.objectives.base import Forced, Objective, Sample, answer_term


@dataclass(frozen=True)
class AnswerObjective(Objective):
    """`conf/attack/answer.yaml`: the answer term alone."""

    title = "answer attack"
    table_order = 1  # the paper's column order

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        term, parts = answer_term(forced, logits, sample)
        loss = self.answer_weight * term
        return loss, {"loss": float(loss.detach()), **parts}
