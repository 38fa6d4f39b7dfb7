"""Our verbalised order-stability protocol (`prompt.calibration=true`; the FACET-PROBE paper's 4-turn confidence
protocol released no code): the system text asks the model, after its answer, for one more line stating the
probability that its answer would stay the same if the evidence were shown in another order. The statement is
parsed from the reply and stored with the trial (`Trial.stated_stability`, in [0, 1]); `table-calibration`
compares it with the realised stability (the share of the item's other orderings that gave the same answer)."""

from __future__ import annotations

import re

#: The protocol's instruction, appended to the system text (after a prompt mitigation's, if any).
STABILITY_INSTRUCTION = (
    "After your answer, add one last line 'Stability: <p>%', where <p> (0-100) is your probability that your "
    "answer would stay the same if the options, documents, images or examples were shown in a different order.")

_STATED = re.compile(r"stability\s*[:=]\s*([0-9]+(?:\.[0-9]+)?)\s*(%?)", re.I)


def parse_stability(text: str | None) -> float | None:
    """The stated stability of a reply in [0, 1] (the last 'Stability: p%' line; a bare number <= 1 is read as
    a probability), None when the reply states none or a value outside 0-100 %."""
    found = _STATED.findall(text or "")
    if not found:
        return None
    value, percent = found[-1]
    p = float(value) / 100 if percent or float(value) > 1 else float(value)
    return p if 0.0 <= p <= 1.0 else None


def protocol_instruction(enabled: bool) -> str:
    """The calibration protocol's instruction when enabled, else ''."""
    return STABILITY_INSTRUCTION if enabled else ""
