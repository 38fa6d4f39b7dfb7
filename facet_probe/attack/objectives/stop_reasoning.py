"""Stop-reasoning attack: make the model answer at once (no rationale), and wrongly.

Loss (minimised) = ``template_weight * CE(template) + answer term``, i.e. the paper's
``L = -CE(t_tar) + L_ch`` written as a loss to minimise. Two forms, chosen by `attack.sequence`
(`config.StopSequence`):

- ``own_reply`` (default, the reference's `Attacker.stop_reasoning` + `baseline`): the teacher-forced
  sequence is the model's own latest reply (the pseudo-target). The template ``The answer is (X).`` and
  the end-of-turn token are pulled over the reply's first positions; the letter slot is skipped and the
  tokens after it (``).``, end of turn) sit one position past it, as in a reply that starts with the
  template. The answer term pushes the gold letter away at the letter the reply itself gives.
- ``template``: the template itself is forced; its tokens before the letter are pulled at the first reply
  positions and the answer term sits at the template's letter slot (a position a model that still reasons
  first never reaches; kept for comparison).

The pseudo-target refresh decides the early stop in both (wrong answer given in the first sentence).
"""

from __future__ import annotations

import torch

from facet_probe.attack.config import StopSequence
from facet_probe.attack.objectives.base import (
    Forced,
    Objective,
    Sample,
    answer_term,
    cross_entropy,
    end_of_reply_id,
    forced_reply,
    forced_template,
)
from facet_probe.attack.spans import template_tokens


class StopReasoningObjective(Objective):
    """The reference's form (``attack.sequence=own_reply``): both terms on the model's own reply."""

    name = "stop_reasoning"

    def prepare(self, adapter, sample: Sample, pseudo_target: str) -> Forced | None:
        target = template_tokens(adapter.tokenizer, sample.gold, end_of_reply_id(adapter))
        return forced_reply(adapter, sample, pseudo_target, template=target)

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        template_ce = cross_entropy(logits[forced.template_rows], forced.template_ids)
        term, parts = answer_term(forced, logits, sample)
        loss = self.settings.template_weight * template_ce + self.settings.answer_weight * term
        return loss, {"loss": float(loss.detach()), "template_ce": float(template_ce.detach()), **parts}


class ForcedTemplateObjective(StopReasoningObjective):
    """``attack.sequence=template``: the template is the forced sequence (tokens before the slot pulled)."""

    follows_pseudo_target = False

    def prepare(self, adapter, sample: Sample, pseudo_target: str) -> Forced:
        return forced_template(adapter, sample)


#: the objective class of each stop-reasoning form
STOP_SEQUENCES: dict[StopSequence, type[StopReasoningObjective]] = {
    StopSequence.OWN_REPLY: StopReasoningObjective, StopSequence.TEMPLATE: ForcedTemplateObjective}
