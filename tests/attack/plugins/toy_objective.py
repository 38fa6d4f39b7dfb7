"""A toy attack objective from outside the package (tests/attack/test_objectives_plugin.py): the gold letter's
log-probability pushed down, with its own success rule and a setting no built-in objective has."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from facet_probe.attack.objectives.base import Forced, Objective, Sample


@dataclass(frozen=True)
class LetterMargin(Objective):
    """Loss = margin_weight * log p(gold letter) at the answer slot."""

    margin_weight: float = 1.0

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        logp = torch.log_softmax(logits[forced.answer_row].float(), dim=-1)[forced.answer_ids[sample.gold]]
        loss = self.margin_weight * logp
        return loss, {"loss": float(loss.detach()), "gold_logp": float(logp.detach())}

    def success(self, reading) -> bool:
        """Only a readable wrong letter counts (a reply without an answer is not a success)."""
        return reading.answer is not None and not reading.correct
