"""Attack objectives as plug-ins: each a frozen dataclass named by `_target_` in `conf/attack/<name>.yaml`.

A new objective is a module (on the Python path) with an `Objective` subclass and a config
(``attack.objective: {_target_: my_module.MyObjective, <its settings>}``) on Hydra's search path;
nothing here lists them. `objective_from_config` builds one from its config node.
"""

from __future__ import annotations

from facet_probe.attack.objectives.answer import AnswerObjective
from facet_probe.attack.objectives.base import EndOfReply, Forced, Objective, Sample, objective_from_config
from facet_probe.attack.objectives.rationale import RationaleObjective
from facet_probe.attack.objectives.stop_reasoning import StopReasoningObjective, StopSequence

__all__ = ["AnswerObjective", "EndOfReply", "Forced", "Objective", "RationaleObjective", "Sample",
           "StopReasoningObjective", "StopSequence", "objective_from_config"]
