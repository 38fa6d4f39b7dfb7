"""Stop-reasoning attack: make the model answer at once (no rationale), and wrongly.

The forced sequence is the answer template itself, ``The answer is (G).``: its tokens before the letter
slot ("The answer is (") are pulled up (CE minimised) at the first positions of the reply, the letter slot
is skipped by the template term and pushed away from the gold letter by the answer term (or toward the
target letter). Loss (minimised) = ``template_weight * CE(template) + answer term``.

Why the template and not the pseudo-target: teacher-forcing the rationale would condition the template's
later tokens on text the attack is removing. Once the model follows the template, its greedy reply *is*
this sequence up to the letter. The pseudo-target refresh still decides the early stop (wrong answer given
in the first sentence).
"""

from __future__ import annotations

import torch

from facet_probe.attack.objectives.base import (
    Forced,
    Objective,
    Sample,
    answer_term,
    cross_entropy,
    forced_template,
)


class StopReasoningObjective(Objective):
    name = "stop_reasoning"
    follows_pseudo_target = False

    def prepare(self, adapter, sample: Sample, pseudo_target: str) -> Forced:
        return forced_template(adapter, sample)

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        template_ce = cross_entropy(logits[forced.template_rows], forced.template_ids)
        term, parts = answer_term(forced, logits, sample)
        loss = self.settings.template_weight * template_ce + self.settings.answer_weight * term
        return loss, {"loss": float(loss.detach()), "template_ce": float(template_ce.detach()), **parts}
