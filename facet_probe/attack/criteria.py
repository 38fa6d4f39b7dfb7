"""Reading a reply (answer, rationale, whether it answers first); each objective's `success` judges it.

The answer is extracted by the core parser (`scoring.parsing.parse_letter`, the instructed form
``The answer is (X).`` in CoT mode, ``Answer: X`` in direct mode, then its documented fallbacks); the
rationale is the text before the answer sentence. A reply without a readable answer is not correct.

The success rules (also the early-stop test at each refresh) are the objectives' own
(`attack.objectives`, `Objective.success`), or the reference's for every attack under
`attack.loop.success=wrong_answer` (`attack.loop.wrong_answer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from facet_probe.attack.spans import answer_in_first_sentence, locate_answer, rationale_of
from facet_probe.core.prompts import PromptMode
from facet_probe.facets.prompts import COT_ANSWER_PREFIX


@dataclass(frozen=True)
class Reading:
    """What one reply says, against the sample's gold letter."""

    text: str
    answer: str | None
    parse_status: str
    parse_rule: str
    correct: bool
    rationale: str  # the text before the answer sentence
    answer_first: bool  # the answer is given in the first sentence (no reasoning before it)

    def to_json(self, prefix: str) -> dict:
        return {f"{prefix}_{k}": v for k, v in asdict(self).items() if k != "text"} | {f"{prefix}_output": self.text}


def read_reply(text: str, labels: Sequence[str], gold: str, mode: PromptMode | str,
               prefix: str = COT_ANSWER_PREFIX) -> Reading:
    """What `text` says; `prefix`: the lead of the instructed CoT answer sentence (the sample's)."""
    loc = locate_answer(text, labels, mode, prefix)
    return Reading(text=text, answer=loc.answer, parse_status=str(loc.status), parse_rule=loc.rule,
                   correct=loc.answer is not None and loc.answer == gold, rationale=rationale_of(text, loc),
                   answer_first=answer_in_first_sentence(text, loc, prefix))


def normalise_rationale(text: str) -> str:
    return " ".join(text.split()).lower()


def rationale_changed(clean: Reading, adv: Reading) -> bool:
    """Whether the adversarial reply reasons differently (whitespace and case ignored)."""
    return normalise_rationale(clean.rationale) != normalise_rationale(adv.rationale)
