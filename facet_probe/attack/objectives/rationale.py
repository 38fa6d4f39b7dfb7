"""Rationale attack: change the reasoning as well as the answer.

Loss (minimised) = ``-kl_weight * KL(p_clean || p_adv)`` averaged over the rationale tokens of the current
pseudo-target, plus the answer term. ``p_clean`` is the model's next-token distribution at those positions
with the clean image (teacher-forced on the same pseudo-target, computed without gradient each time the
pseudo-target changes), ``p_adv`` the same with the adversarial image. A pseudo-target without a rationale
leaves only the answer term. Success: the answer is no longer the correct one. Needs CoT prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from facet_probe.attack.objectives.base import Forced, Objective, Sample, answer_term


def rationale_kl(forced: Forced, logits: torch.Tensor) -> torch.Tensor:
    """Mean over rationale rows of KL(clean || adversarial)."""
    if not forced.rationale_rows:
        return logits.sum() * 0.0
    if forced.reference is None:
        raise ValueError("the rationale objective needs the clean log-probs (Forced.reference)")
    adv = torch.log_softmax(logits[forced.rationale_rows].float(), dim=-1)
    ref = forced.reference.to(adv.device)
    return (ref.exp() * (ref - adv)).sum(-1).mean()


@dataclass(frozen=True)
class RationaleObjective(Objective):
    """`conf/attack/rationale.yaml`: the rationale KL term + the answer term."""

    kl_weight: float = 1.0  # weight of the rationale KL term

    needs_reference = True
    needs_rationale = True
    title = "rationale attack"
    table_order = 2  # the paper's column order

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        kl = rationale_kl(forced, logits)
        term, parts = answer_term(forced, logits, sample)
        loss = -self.kl_weight * kl + self.answer_weight * term
        return loss, {"loss": float(loss.detach()), "kl": float(kl.detach()), **parts}
