"""What every objective shares: the sample, the teacher-forced sequence and its spans, the answer term.

An objective is a plug-in: a frozen dataclass named by the `_target_` of the `attack.objective` config
node (`conf/attack/<name>.yaml`), whose fields are its typed settings (weights, ...), checked by
`objective_from_config`. It is config in, loss out: `prepare` turns the current pseudo-target (the latest greedy reply)
into a `Forced` sequence (prompt + forced text, with the logits positions each term reads, found by
tokenising the text: `attack.spans`), and `loss` turns the logits at those positions into the scalar PGD
minimises plus its named components (for the per-step curves), and `success` is its success rule (also
the early-stop test at each refresh, under the project's loop: `attack.loop`). Objectives never call the model; the driver (`attack.pgd`) runs the
forwards, batched over samples. The whole settings object (`settings()`, `_target_` included) keys resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum, StrEnum
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from facet_probe.attack.criteria import Reading, read_reply
from facet_probe.attack.spans import (
    SpanError,
    answer_template,
    letter_slot,
    locate_answer,
    token_offsets,
    tokens_before,
)
from facet_probe.attack.typed import typed_instance
from facet_probe.config.overrides import set_fields
from facet_probe.core.errors import ConfigError
from facet_probe.core.prompts import Prompt, PromptMode
from facet_probe.facets.prompts import COT_ANSWER_PREFIX
from facet_probe.runners.base import declared
from facet_probe.runners.hf.encoded import Encoded


@dataclass(frozen=True)
class Sample:
    """One attacked question: the rendered prompt (options in source order), its labels and gold letter."""

    sample_id: str  # file-name safe
    item_id: str
    prompt: Prompt
    labels: tuple[str, ...]
    gold: str  # the correct letter
    target: str | None = None  # the targeted attack's wrong letter (None: untargeted)
    options: tuple[str, ...] = ()  # the option texts in displayed order (labels[i] -> options[i])
    question: str = ""  # the item's question (the rationale judge shows it)
    answer_prefix: str = COT_ANSWER_PREFIX  # the lead of the CoT answer sentence the prompt asks for

    def read(self, text: str) -> Reading:
        """What a reply to this sample says (`criteria.read_reply` with its labels, gold, mode and form)."""
        return read_reply(text, self.labels, self.gold, self.mode, self.answer_prefix)

    @property
    def mode(self) -> PromptMode:
        return PromptMode(self.prompt.mode)


@dataclass
class Forced:
    """A teacher-forced sequence: prompt + `text`, and which logits rows each loss term reads.

    `positions` are absolute positions of the sequence whose logits are computed (logits at p predict
    token p + 1); the `*_rows` index into them."""

    text: str
    encoded: Encoded  # with `text` as its target (`target_span`)
    positions: list[int]
    answer_row: int | None = None  # predicts the answer letter's token
    # option label -> the token it puts in the letter slot: every displayed letter (`Sample.labels`) the tokenizer
    # writes in that one slot (all of them for an objective that `needs_every_letter`); the gold (and the
    # targeted attack's target) letter always
    answer_ids: dict[str, int] = field(default_factory=dict)
    rationale_rows: list[int] = field(default_factory=list)  # predict the rationale's tokens
    template_rows: list[int] = field(default_factory=list)  # predict the template's tokens (slot excluded)
    template_ids: list[int] = field(default_factory=list)
    reference: torch.Tensor | None = None  # reference log-probs at rationale_rows (rationale attack; attack.loop)
    reply_rows: list[int] = field(default_factory=list)  # predict every forced token, in order (`with_reply_rows`)


def with_reply_rows(forced: Forced) -> Forced:
    """`forced` with logits also at every position predicting one of its tokens (`reply_rows`): what the
    teacher-forced argmax text is read from. The new positions go after the old ones, so every row an objective
    set keeps its index."""
    assert forced.encoded.target_span is not None, "a forced sequence is encoded with its text as target"
    start, end = forced.encoded.target_span
    reply = list(range(start - 1, end - 1))
    positions = [*forced.positions, *(p for p in reply if p not in set(forced.positions))]
    row = {p: r for r, p in enumerate(positions)}
    return replace(forced, positions=positions, reply_rows=[row[p] for p in reply])


def build_forced(adapter, sample: Sample, text: str, letter_char: int, sentence_start: int,
                 template: Sequence[tuple[int, int]] | None = None, every_letter: bool = False) -> Forced:
    """Encode prompt + `text` and find the answer slot, the rationale (before `sentence_start`) and the
    template by tokenising `text`.

    `template`: ``(index in text's tokens, token id)`` pairs to pull at those positions (index = len(tokens)
    is the position after the text; pairs past it are dropped); None: the tokens of `text` before the slot.
    `every_letter`: every option letter must fit in the slot (`Objective.needs_every_letter`), else SpanError."""
    enc = adapter.encode(sample.prompt, text)
    ids, offsets = token_offsets(adapter.tokenizer, text)
    if ids != enc.target_ids.tolist():
        raise SpanError("the adapter tokenised the forced text differently from the span tokenizer")
    # the letters the answer term compares must fit in the slot; the other option letters are there when they
    # do (a tokenizer may split another letter differently: "Answer: B" -> ":", " ", "B" beside ":", " C")
    scored = (sample.gold,) if sample.target is None else (sample.gold, sample.target)
    slot = letter_slot(adapter.tokenizer, text, letter_char, sample.labels if every_letter else scored,
                       optional=sample.labels)
    start = enc.target_span[0]
    rationale = tokens_before(offsets, sentence_start)
    if template is None:
        template = [(i, ids[i]) for i in range(slot.index) if offsets[i][1] > offsets[i][0]]
    template = [(i, t) for i, t in template if i <= len(ids)]  # logits at the last token predict index len(ids)
    wanted = sorted({start + i - 1 for i in (*rationale, *(i for i, _ in template), slot.index)})
    row = {p: r for r, p in enumerate(wanted)}
    return Forced(text=text, encoded=enc, positions=wanted, answer_row=row[start + slot.index - 1],
                  answer_ids=slot.ids, rationale_rows=[row[start + i - 1] for i in rationale],
                  template_rows=[row[start + i - 1] for i, _ in template], template_ids=[t for _, t in template])


def forced_reply(adapter, sample: Sample, reply: str, template: Sequence[tuple[int, int]] | None = None,
                 every_letter: bool = False) -> Forced | None:
    """The pseudo-target `reply` as a forced sequence, or None when it has no locatable answer."""
    loc = locate_answer(reply, sample.labels, sample.mode, sample.answer_prefix)
    if loc.letter_char is None or loc.sentence_start is None:
        return None
    return build_forced(adapter, sample, reply, loc.letter_char, loc.sentence_start, template, every_letter)


def forced_template(adapter, sample: Sample, every_letter: bool = False) -> Forced:
    """``The answer is (G).`` (the sample's answer form) as a forced sequence (G = gold; the slot itself is
    never scored)."""
    text, letter_char = answer_template(sample.gold, sample.answer_prefix)
    return build_forced(adapter, sample, text, letter_char, sentence_start=0, every_letter=every_letter)


class EndOfReply(StrEnum):
    """What closes the stop-reasoning template after ``The answer is (X).`` (docs/attacks.md)."""

    #: the family's end of turn (`HFRunner.end_of_turn`), tokenised after the template as the reference tokenises
    #: ``The answer is ().`` + its `end_sym` (``###`` for MiniGPT-4 on Vicuna v0)
    TURN = "turn"
    #: the model's first generation EOS (``</s>`` on Vicuna / LLaMA): the reference's `end_sym` for its LLaMA-2
    #: MiniGPT-4 config, and this project's form before the families declared their end of turn
    EOS = "eos"


def end_of_reply_id(adapter) -> int | None:
    """The first of the model's generation `eos_token_id`s (where greedy generation stops), else the tokenizer's
    EOS; None when the model has neither."""
    ending = declared(adapter).turn_ending  # a family's model (a test double may have none)
    config = getattr(ending.model, "generation_config", None) if ending is not None else None
    eos = getattr(config, "eos_token_id", None)
    if eos is None:
        eos = getattr(adapter.tokenizer, "eos_token_id", None)
    if isinstance(eos, list | tuple):
        eos = eos[0] if eos else None
    return None if eos is None else int(eos)


def end_of_reply_ids(adapter, text: str, end: EndOfReply = EndOfReply.TURN) -> list[int]:
    """The token ids that close a reply written as `text`. `turn`: the family's end-of-turn text (its runner's
    `end_of_turn`) tokenised right after `text`, as the reference tokenises its whole target string (Vicuna
    spells ``###`` after ``).`` as ``##`` + ``#``); `eos`, or a family that declares none: `end_of_reply_id`."""
    ending = declared(adapter).turn_ending
    turn = ending.end_of_turn if ending is not None and end is EndOfReply.TURN else None
    if not turn:
        eos = end_of_reply_id(adapter)
        return [] if eos is None else [eos]
    before, _ = token_offsets(adapter.tokenizer, text)
    after, _ = token_offsets(adapter.tokenizer, text + turn)
    if len(after) <= len(before) or after[:len(before)] != before:
        raise SpanError(f"the end of turn {turn!r} merges with the end of {text!r} when tokenised after it")
    return after[len(before):]


def cross_entropy(logits: torch.Tensor, ids: list[int] | int) -> torch.Tensor:
    """Mean CE of `ids` under `logits` rows (float32)."""
    target = torch.as_tensor([ids] if isinstance(ids, int) else ids, dtype=torch.long, device=logits.device)
    rows = logits.float().reshape(-1, logits.shape[-1])
    return F.cross_entropy(rows, target)


def answer_term(forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
    """The answer term to minimise: -CE(gold letter) (untargeted) or CE(target letter) (targeted)."""
    row = logits[forced.answer_row]
    ce_gold = cross_entropy(row, forced.answer_ids[sample.gold])
    parts = {"answer_ce": float(ce_gold.detach())}
    if sample.target is None:
        return -ce_gold, parts
    ce_target = cross_entropy(row, forced.answer_ids[sample.target])
    parts["target_ce"] = float(ce_target.detach())
    return ce_target, parts


@dataclass(frozen=True)
class Objective:
    """Base class: one attack's forced sequence, loss and success rule (see the module docstring).

    Subclasses are frozen dataclasses; their fields are the objective's settings (all recorded for resume)."""

    answer_weight: float = 1.0  # the answer term, part of every built-in objective

    #: whether `loss` needs the clean image's log-probs at `Forced.rationale_rows` (`Forced.reference`)
    needs_reference: ClassVar[bool] = False
    #: whether the objective needs a rationale, i.e. chain-of-thought prompts (else the run is skipped)
    needs_rationale: ClassVar[bool] = False
    #: whether `loss` reads every option letter in `Forced.answer_ids` (a sample whose letters the tokenizer cannot
    #: put in one slot is then not attacked, with the reason); else only the gold and target are sure to be there
    needs_every_letter: ClassVar[bool] = False
    #: how the tables name the attack (None: its config's `name`) and where its columns sit among a mode's
    #: attacks (lower first, then by name); recorded in the run's summary.json
    title: ClassVar[str | None] = None
    table_order: ClassVar[int] = 100
    #: `success` in words (the run's summary line prints it beside the reference's count)
    success_rule: ClassVar[str] = "the answer is no longer correct"
    #: whether the attack aims at an answer given before any reasoning; the reference's loop then lets a refresh whose
    #: reply still reasons first (and has an answer) clear a pending early stop (`attack.loop.stop_on_update`)
    aims_at_answer_first: ClassVar[bool] = False

    @property
    def follows_pseudo_target(self) -> bool:
        """Whether the forced sequence follows the pseudo-target (False: it is fixed, e.g. the template)."""
        return True

    def prepare(self, adapter, sample: Sample, pseudo_target: str) -> Forced | None:
        """The forced sequence for the current pseudo-target (None: it has no answer to attack)."""
        return forced_reply(adapter, sample, pseudo_target, every_letter=self.needs_every_letter)

    def loss(self, forced: Forced, logits: torch.Tensor, sample: Sample) -> tuple[torch.Tensor, dict[str, float]]:
        """(scalar to minimise, components) from the logits at `forced.positions`."""
        raise NotImplementedError

    def success(self, reading: Reading) -> bool:
        """Whether the adversarial reply meets this attack's goal: by default, the answer is no longer correct."""
        return not reading.correct

    def settings(self) -> dict[str, Any]:
        """Every setting as JSON-able values (enums by value), with the `_target_` that built it."""
        cls = type(self)
        return {"_target_": f"{cls.__module__}.{cls.__qualname__}",
                **{k: v.value if isinstance(v, Enum) else v for k, v in asdict(self).items()}}

    def changed_settings(self) -> dict[str, Any]:
        """The settings set away from the class's defaults (JSON-able): they name the run folder and the tables'
        column, so runs of one attack with other settings sit side by side."""

        every = self.settings()
        return {k: every[k] for k in set_fields(self)}


def objective_from_config(node: Any, what: str = "attack.objective") -> Objective | None:
    """The objective a config node declares (``{_target_: <Objective subclass>, <its settings>}``), its
    settings type-checked; None for a null node (no attack)."""
    if node is None:
        return None
    if not isinstance(node, dict) or not node.get("_target_"):
        raise ConfigError(f"{what} must be null (no attack) or a config with a _target_ naming an Objective "
                          f"class (see conf/attack/answer.yaml); got {node!r}")
    from hydra.utils import get_class

    target = node["_target_"]
    try:
        cls = get_class(target)
    except Exception as exc:  # ImportError or a missing attribute, as Hydra words it
        raise ConfigError(f"{what}._target_ {target!r} cannot be imported ({exc}); is its module on the "
                          "Python path?") from None
    if not (isinstance(cls, type) and issubclass(cls, Objective)):
        raise ConfigError(f"{what}._target_ {target!r} is not a subclass of "
                          "facet_probe.attack.objectives.base.Objective")
    return typed_instance(cls, {k: v for k, v in node.items() if k != "_target_"}, what, owner=target)
