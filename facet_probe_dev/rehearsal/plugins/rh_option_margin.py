"""rh_option_margin: a margin loss over every option letter (Carlini-Wagner style): push the gold letter's logit
below the best other letter's by `kappa`; success is a readable wrong letter."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from facet_probe.attack.objectives.base import Forced, Objective, Sample


@dataclass(frozen=True)
class OptionMargin(Objective):
    kappa: float = 0.0
    needs_every_letter = True  # a sample whose letters cannot share the answer slot is left unattacked, not scored on fewer

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        row = logits[forced.answer_row].float()
        ids = forced.answer_ids
        gold = row[ids[sample.gold]]
        others = torch.stack([row[i] for letter, i in ids.items() if letter != sample.gold])
        loss = torch.clamp(gold - others.max(), min=-self.kappa)
        return loss, {"loss": float(loss.detach()), "gold_margin": float((gold - others.max()).detach())}

    def success(self, reading) -> bool:
        return reading.answer is not None and not reading.correct
