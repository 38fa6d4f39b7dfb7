"""The reference's prompts and ScienceQA selection (aiPenguin/StopReasoning), as switches beside the project's.

`prompt.preset` (`PromptPreset`):

- ``project`` (default): the option-order facet's rendering in source order (the project's system text,
  layout and instructions, `facets/prompts.py`), as the audit shows the model.
- ``reference``: the reference's user text (`utils/datasets.py`): the image, then
  ``Question: <q>\\nChoices: (A) x, (B) y\\n`` and, with CoT, its instruction (README, `--prompt`) asking
  for a rationale and ``The answer is ().``; no system text and no hint. The reference does not publish
  its w/o-CoT instruction, so direct mode keeps the project's (``Answer: X``). Its ImageNet items ask
  ``What is the class of the image?`` with no ``Question:`` lead (as `datasets.imagenet` does) and are answered in the form
  ``The class of the image is ().`` (its `Attacker` key ``class``: the stop-reasoning template and the
  answer-first test use that sentence); the instruction asks for that form, the reply is read with it
  (`Sample.answer_prefix`, `scoring.parsing.parse_letter(cot_prefix=...)`).

`selection` (`Selection`): ``reference`` drops the ScienceQA items of category "State capitals", as the
reference's `ScienceQADataset` does; ``project`` (default) keeps every image question. The reference's
prompt never shows ScienceQA's hint; the project's shows it as context.
"""

from __future__ import annotations

from enum import StrEnum

from facet_probe.core.items import Item
from facet_probe.core.prompts import AnswerFormat, ImagePart, Message, Prompt, PromptMode, TextPart
from facet_probe.datasets.imagenet import QUESTION as IMAGENET_QUESTION
from facet_probe.facets.prompts import COT_ANSWER_PREFIX, DIRECT_INSTRUCTIONS

_INSTRUCTION = (
    "First, generate a rationale with at least three sentences that can be used to infer the answer to the "
    "question. At last, infer the answer according to the question, the image, and the generated rationale. "
    "The answer should be in the form '{form} ().'")
#: the reference's CoT instruction (its README's `--prompt`)
REFERENCE_COT_INSTRUCTION = _INSTRUCTION.format(form=COT_ANSWER_PREFIX)
#: the lead of the reference's ImageNet answer sentence (`Attacker.stop_reasoning`, key "class")
REFERENCE_CLASS_PREFIX = "The class of the image is"
REFERENCE_EXCLUDED_CATEGORIES = ("State capitals",)


class PromptPreset(StrEnum):
    PROJECT = "project"
    REFERENCE = "reference"


class Selection(StrEnum):
    PROJECT = "project"
    REFERENCE = "reference"


def reference_answer_prefix(item: Item) -> str:
    """The lead of the CoT answer sentence the reference asks for: ``The class of the image is`` for its
    ImageNet question, else ``The answer is``."""
    return REFERENCE_CLASS_PREFIX if item.question == IMAGENET_QUESTION else COT_ANSWER_PREFIX


def reference_question(item: Item) -> str:
    """The reference's question line: ``Question: <q>`` (ScienceQA, A-OKVQA), its ImageNet question bare."""
    return item.question if item.question == IMAGENET_QUESTION else f"Question: {item.question}"


def reference_prompt(item: Item, mode: PromptMode) -> Prompt:
    """The reference's prompt for `item`: its images, then question, choices and instruction."""
    labels = tuple(chr(65 + i) for i in range(len(item.choices)))
    choices = ", ".join(f"({lab}) {text}" for lab, text in zip(labels, item.choices, strict=True))
    instruction = (_INSTRUCTION.format(form=reference_answer_prefix(item)) if mode == PromptMode.COT
                   else DIRECT_INSTRUCTIONS[AnswerFormat.LETTER])
    images = tuple(ImagePart(c.image) for c in item.fixed if c.image is not None)
    text = f"{reference_question(item)}\nChoices: {choices}\n{instruction}"
    return Prompt(system="", messages=(Message("user", (*images, TextPart(text))),), mode=mode,
                  answer_format=AnswerFormat.LETTER, labels=labels)


def selected(items: list[Item], selection: Selection) -> list[Item]:
    """The items the selection keeps (the reference drops ScienceQA's "State capitals")."""
    if selection == Selection.PROJECT:
        return items
    return [it for it in items if (it.metadata or {}).get("category") not in REFERENCE_EXCLUDED_CATEGORIES]
