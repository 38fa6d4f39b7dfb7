"""One module per attack objective (config in, loss out); `build_objective` picks one by name."""

from __future__ import annotations

from facet_probe.attack.config import AttackSettings
from facet_probe.attack.objectives.answer import AnswerObjective
from facet_probe.attack.objectives.base import Forced, Objective, Sample
from facet_probe.attack.objectives.rationale import RationaleObjective
from facet_probe.attack.objectives.stop_reasoning import (
    STOP_SEQUENCES,
    ForcedTemplateObjective,
    StopReasoningObjective,
)

OBJECTIVES: dict[str, type[Objective]] = {
    "answer": AnswerObjective, "rationale": RationaleObjective, "stop_reasoning": StopReasoningObjective}


def build_objective(settings: AttackSettings) -> Objective:
    if settings.name not in OBJECTIVES:
        raise ValueError(f"no objective for attack {settings.name!r}; valid: {', '.join(OBJECTIVES)}")
    if settings.name == "stop_reasoning":  # the form `attack.sequence` names
        return STOP_SEQUENCES[settings.sequence](settings)
    return OBJECTIVES[settings.name](settings)


__all__ = ["OBJECTIVES", "STOP_SEQUENCES", "AnswerObjective", "Forced", "ForcedTemplateObjective", "Objective",
           "RationaleObjective", "Sample", "StopReasoningObjective", "build_objective"]
