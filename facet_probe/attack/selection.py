"""Which samples are attacked: those the model answers correctly on the clean image (paper, Sec. 4).

With chain-of-thought prompts the clean reply must also *involve a rationale* (text before the answer
sentence): a rationale or stop-reasoning attack on a reply that already skips the reasoning would measure
nothing. Every sample gets a recorded reason, attacked or not, in the run's results.
"""

from __future__ import annotations

from dataclasses import dataclass

from facet_probe.attack.criteria import Reading
from facet_probe.core.prompts import PromptMode

SELECTED = "correct"


@dataclass(frozen=True)
class Selection:
    selected: bool
    reason: str  # correct | wrong_answer | no_answer | no_rationale | no_image


def select(reading: Reading, mode: PromptMode | str, *, has_image: bool = True) -> Selection:
    """Attack only correct clean replies (with a rationale when the prompt asks for one)."""
    if not has_image:
        return Selection(False, "no_image")
    if reading.answer is None:
        return Selection(False, "no_answer")
    if not reading.correct:
        return Selection(False, "wrong_answer")
    if PromptMode(mode) == PromptMode.COT and not reading.rationale.strip():
        return Selection(False, "no_rationale")
    return Selection(True, SELECTED)
