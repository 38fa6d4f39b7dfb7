"""Scoring: a reply to one rendered ordering -> the answer's meaning and its correctness.

`answer_normalized` is comparable across orderings: for multiple-choice items the *source-order*
letter of the chosen option (A = ``item.choices[0]``, whatever was displayed first), for free-form
items the normalised text, for tool items the function name. Unparseable replies score as
`PARSE_ERROR`, incorrect.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum

from facet_probe.core.items import AnswerType, ComponentKind, Item
from facet_probe.core.prompts import Prompt
from facet_probe.core.trials import PARSE_ERROR
from facet_probe.facets.base import Facet
from facet_probe.facets.prompts import OPTION_LETTERS
from facet_probe.scoring.parsing import (
    LetterParser,
    ParseStatus,
    normalize_free,
    parse_free,
    parse_letter,
    parse_tool,
)


class ScoreKind(StrEnum):
    LETTER = "letter"  # MCQ whose options are shown in source order
    INVERSE_PERMUTATION = "inverse_permutation"  # MCQ whose options were permuted (option_order)
    EXACT_MATCH = "exact_match"  # free-form, normalised exact match against gold and aliases
    TOOL_NAME = "tool_name"  # the chosen function name
    JUDGE = "judge"  # free-form, correctness set by an LLM judge


@dataclass(frozen=True)
class Score:
    """The scored fields of a `Trial` (same names, so ``Trial(**asdict(score), ...)`` works)."""

    answer_raw: str | None  # as displayed (e.g. the letter the model wrote)
    answer_normalized: str
    gold_normalized: str
    correct: bool
    score_kind: str
    parse_status: str

    def as_dict(self) -> dict:
        return asdict(self)


def source_letter(index: int) -> str:
    """The source-order letter of option `index` (0 -> "A")."""
    return OPTION_LETTERS[index]


def tool_names(item: Item) -> tuple[str, ...]:
    """The function names an item offers: the titles of its tool components."""
    return tuple((c.title or "").strip() for c in item.components_of(ComponentKind.TOOL))


def permutes_choices(facet: Facet) -> bool:
    """Does the facet reorder the options (it overrides `choice_order`, as option_order does)?"""
    return type(facet).choice_order is not Facet.choice_order


def _unparsed(gold: str, kind: ScoreKind) -> Score:
    return Score(None, PARSE_ERROR, gold, False, str(kind), str(ParseStatus.PARSE_ERROR))


def score_mcq(item: Item, facet: Facet, permutation: Sequence[int], prompt: Prompt, text: str,
              letter_parser: LetterParser = LetterParser.OURS) -> Score:
    """Displayed letter -> display slot -> source option (through `facet.choice_order`)."""
    kind = ScoreKind.INVERSE_PERMUTATION if permutes_choices(facet) else ScoreKind.LETTER
    gold = source_letter(item.gold_choice)
    order = facet.choice_order(item, permutation)
    if len(prompt.labels) != len(order):
        raise ValueError(f"item {item.item_id}: the prompt shows {len(prompt.labels)} option labels but the "
                         f"item has {len(order)} options; was the prompt rendered for this item?")
    parsed = parse_letter(text, prompt.labels, prompt.mode, parser=letter_parser)
    if not parsed.ok or parsed.answer is None:
        return _unparsed(gold, kind)
    source = order[prompt.labels.index(parsed.answer)]
    answer = source_letter(source)
    return Score(parsed.answer, answer, gold, answer == gold, str(kind), str(parsed.status))


def score_free(item: Item, facet: Facet, permutation: Sequence[int], prompt: Prompt, text: str) -> Score:
    """Normalised exact match against the gold answer or any alias."""
    gold = normalize_free(item.gold_answer)
    accepted = {gold, *(normalize_free(a) for a in item.answer_aliases)}
    parsed = parse_free(text, prompt.mode)
    answer = normalize_free(parsed.answer) if parsed.ok else ""
    if not answer:  # nothing read, or only punctuation/articles
        return _unparsed(gold, ScoreKind.EXACT_MATCH)
    return Score(parsed.answer, answer, gold, answer in accepted, str(ScoreKind.EXACT_MATCH),
                 str(parsed.status))


def score_tool(item: Item, facet: Facet, permutation: Sequence[int], prompt: Prompt, text: str) -> Score:
    """The chosen function name among the offered tools, compared with the gold tool."""
    gold = (item.gold_answer or "").strip()
    parsed = parse_tool(text, tool_names(item), prompt.mode)
    if not parsed.ok or parsed.answer is None:
        return _unparsed(gold, ScoreKind.TOOL_NAME)
    return Score(parsed.answer, parsed.answer, gold, parsed.answer == gold, str(ScoreKind.TOOL_NAME),
                 str(parsed.status))


SCORERS: dict[AnswerType, Callable[[Item, Facet, Sequence[int], Prompt, str], Score]] = {
    AnswerType.MCQ: score_mcq,
    AnswerType.FREE: score_free,
    AnswerType.TOOL: score_tool,
}


def score(item: Item, facet: Facet, permutation: Sequence[int], prompt: Prompt, response_text: str,
          letter_parser: LetterParser = LetterParser.OURS) -> Score:
    """Score one reply to the prompt `facet` rendered for `item` under `permutation` (`letter_parser`: how an
    MCQ reply's letter is read, ours or FACET-PROBE v0.0.1's)."""
    if item.answer_type == AnswerType.MCQ:
        return score_mcq(item, facet, permutation, prompt, response_text or "", letter_parser)
    return SCORERS[item.answer_type](item, facet, permutation, prompt, response_text or "")


def with_judge_verdict(result: Score, correct: bool) -> Score:
    """A free-form score whose correctness a judge decided (the normalised answer is kept)."""
    if result.answer_normalized == PARSE_ERROR:
        return result
    return replace(result, correct=bool(correct), score_kind=str(ScoreKind.JUDGE))
