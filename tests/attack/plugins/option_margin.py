"""A plug-in objective written from docs/plugins.md alone (tests/attack/test_tables_plugin_objective.py): a margin loss over
every option letter, with a setting of its own (`kappa`) and no `prepare` of its own."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from facet_probe.attack.objectives.base import Forced, Objective, Sample


@dataclass(frozen=True)
class OptionMargin(Objective):
    """Loss = max(logit(gold) - max over the other option letters of their logit, -kappa) at the letter slot:
    a Carlini-Wagner margin that stops pushing once another letter leads by kappa."""

    kappa: float = 0.0

    needs_every_letter = True  # its loss reads every option letter's token in the slot

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        row = logits[forced.answer_row].float()
        others = [forced.answer_ids[label] for label in sample.labels if label != sample.gold]
        margin = row[forced.answer_ids[sample.gold]] - row[others].max()
        loss = self.answer_weight * torch.clamp(margin, min=-self.kappa)
        return loss, {"loss": float(loss.detach()), "margin": float(margin.detach()),
                      "letters": float(len(others) + 1)}
