"""Stop-reasoning attack: make the model answer at once (no rationale), and wrongly.

Loss (minimised) = ``template_weight * CE(template) + answer term``, i.e. the paper's
``L = -CE(t_tar) + L_ch`` written as a loss to minimise. Two forms, chosen by `attack.objective.sequence`
(`StopSequence`):

- ``own_reply`` (default, the reference's `Attacker.stop_reasoning` + `baseline`): the teacher-forced
  sequence is the model's own latest reply (the pseudo-target). The template ``The answer is (X).`` and
  the end of turn are pulled over the reply's first positions; the letter slot is skipped and the
  tokens after it (``).``, end of turn) sit one position past it, as in a reply that starts with the
  template. The answer term pushes the gold letter away at the letter the reply itself gives.
  The end of turn is the family's (`attack.objective.end_of_reply=turn`, the reference's `end_sym`:
  ``###`` for MiniGPT-4 on Vicuna v0, ``<end_of_utterance>`` for IDEFICS, ...), or the model's first
  generation EOS (`eos`: ``</s>`` on Vicuna, the reference's `end_sym` for its LLaMA-2 MiniGPT-4).
- ``template``: the template itself is forced; its tokens before the letter are pulled at the first reply
  positions and the answer term sits at the template's letter slot (a position a model that still reasons
  first never reaches; kept for comparison).

Success (and the early stop at each refresh), in both: the answer is wrong **and** given in the first
sentence (the model answered without reasoning first); `attack.loop.success=wrong_answer` (the reference's
loop) counts any wrong answer, as the reference's success rate (1 - accuracy) does. Needs CoT prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import torch

from facet_probe.attack.criteria import Reading
from facet_probe.attack.objectives.base import (
    EndOfReply,
    Forced,
    Objective,
    Sample,
    answer_term,
    cross_entropy,
    end_of_reply_ids,
    forced_reply,
    forced_template,
)
from facet_probe.attack.spans import answer_template, template_tokens
from facet_probe.core.errors import parse_enum


class StopSequence(StrEnum):
    """Which teacher-forced sequence the stop-reasoning loss reads (docs/attacks.md).

    `own_reply` (the reference, aiPenguin/StopReasoning `Attacker.stop_reasoning`): the model's own latest
    reply; the template ``The answer is (X).`` + end of turn is pulled over its first positions, the
    letter slot skipped, and the answer term sits at the letter the reply gives. `template`: the template
    itself is forced and the answer term sits at its letter slot (this project's earlier form)."""

    OWN_REPLY = "own_reply"
    TEMPLATE = "template"


@dataclass(frozen=True)
class StopReasoningObjective(Objective):
    """`conf/attack/stop_reasoning.yaml`: the template CE + the answer term, on the sequence `sequence` names."""

    template_weight: float = 1.0  # weight of the template CE term
    sequence: StopSequence = StopSequence.OWN_REPLY  # the sequence the loss reads
    end_of_reply: EndOfReply = EndOfReply.TURN  # what closes the template: the family's end of turn, or its EOS

    needs_rationale = True
    title = "stop-reasoning attack"
    table_order = 3  # the paper's column order
    success_rule = "a wrong answer given in the first sentence"
    aims_at_answer_first = True

    def __post_init__(self) -> None:  # a value given by name (Python callers) becomes the member
        object.__setattr__(self, "sequence", parse_enum(StopSequence, self.sequence, "attack.objective.sequence"))
        object.__setattr__(self, "end_of_reply", parse_enum(EndOfReply, self.end_of_reply,
                                                            "attack.objective.end_of_reply"))

    @property
    def follows_pseudo_target(self) -> bool:
        return self.sequence is StopSequence.OWN_REPLY

    def prepare(self, adapter, sample: Sample, pseudo_target: str) -> Forced | None:
        if self.sequence is StopSequence.TEMPLATE:  # the template forced, tokens before the slot pulled
            return forced_template(adapter, sample, self.needs_every_letter)
        text, _ = answer_template(sample.gold, sample.answer_prefix)
        end = end_of_reply_ids(adapter, text, self.end_of_reply)
        target = template_tokens(adapter.tokenizer, sample.gold, end, sample.answer_prefix)
        return forced_reply(adapter, sample, pseudo_target, template=target, every_letter=self.needs_every_letter)

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        template_ce = cross_entropy(logits[forced.template_rows], forced.template_ids)
        term, parts = answer_term(forced, logits, sample)
        loss = self.template_weight * template_ce + self.answer_weight * term
        return loss, {"loss": float(loss.detach()), "template_ce": float(template_ce.detach()), **parts}

    def success(self, reading: Reading) -> bool:
        """The answer is wrong and given in the first sentence (no reasoning before it)."""
        return not reading.correct and reading.answer_first
