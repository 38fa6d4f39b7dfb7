"""The PGD loop's rules where this project's loop and the reference's `Attacker.pgd_attack` differ (`attack.loop`).

The node is chosen from the config group `conf/attack/loop/`: ``attack/loop=project`` (the default) or
``attack/loop=reference`` (aiPenguin/StopReasoning), one rule at a time with ``attack.loop.<rule>=<value>``. An
attack of `attack.steps` = N runs iterations i = 0..N-1 on the image x_i (x_0 the random start); each is a
teacher-forced forward with its loss and gradient, then (in this order) the last-iteration rule, the early-stop
check, a refresh of the pseudo-target when one is due, and the signed step to x_{i+1} (`attack.pgd`).
docs/attacks.md ("Where we differ from the paper's code") lists each rule with both settings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import Enum, StrEnum
from typing import Any

from facet_probe.attack.typed import typed_instance
from facet_probe.core.errors import ConfigError


class LastIteration(StrEnum):
    """Whether the last iteration steps: N updates (`step`), or N - 1 (`loss_only`, the reference: its last
    iteration records its loss and breaks before the step)."""

    STEP = "step"
    LOSS_ONLY = "loss_only"


class RefreshImage(StrEnum):
    """Which image a refresh (every `attack.update_every` iterations) generates on: the image after that
    iteration's step, x_U, x_2U, ... (`after_step`), or the one before it, x_{U-1}, x_{2U-1}, ... (`before_step`,
    the reference: it regenerates at iteration i with (i+1) % U == 0, i > 0, before the step)."""

    AFTER_STEP = "after_step"
    BEFORE_STEP = "before_step"


class KLReference(StrEnum):
    """The rationale attack's reference distribution: the clean image's log-probs on the pseudo-target,
    recomputed when it changes (`clean`), or the log-probs on the image each refresh generated on, retaken at
    every refresh (`refresh`, the reference: its KL restarts near 0 after each refresh)."""

    CLEAN = "clean"
    REFRESH = "refresh"


class EarlyStopCheck(StrEnum):
    """When and on what `attack.early_stop` looks: the objective's success rule on each refresh's greedy reply
    (`refresh_reply`), or the answer in each iteration's teacher-forced argmax text (`forced_argmax`, the
    reference: a wrong answer stops, at once or, with `stop_on_update`, at the next refresh; no answer always
    ends the attack, as the reference has no letter to attack then)."""

    REFRESH_REPLY = "refresh_reply"
    FORCED_ARGMAX = "forced_argmax"


class SuccessRule(StrEnum):
    """What `success` means: the objective's own rule (`objective`: stop-reasoning also needs the answer in the
    first sentence), or the reference's for every attack (`wrong_answer`: the final answer is not the gold
    letter, i.e. 1 - accuracy; the target letter for a targeted attack)."""

    OBJECTIVE = "objective"
    WRONG_ANSWER = "wrong_answer"


#: how the reference's rule reads in summaries and logs
WRONG_ANSWER_RULE = "a wrong answer (the reference's rule, 1 - accuracy; targeted: the target letter)"


def wrong_answer(answer: str | None, correct: bool, target: str | None) -> bool:
    """The reference's success for a final `answer` (`correct`: it is the gold letter): the answer is not the gold
    letter (targeted: it is the `target` letter)."""
    return answer == target if target else not correct


def folder_label(name: str | None) -> str:
    """``-loop_<name>`` after the budget folder's name, '' for the project's loop (older folders keep theirs)."""
    return "" if name in (None, "project") else f"-loop_{name}"


@dataclass(frozen=True)
class LoopRules:
    """One `conf/attack/loop/<name>.yaml`: the name that labels the budget folder, and a rule per difference."""

    name: str = "project"  # labels the budget folder (``eps16-a1-s200-u10-loop_reference``) unless "project"
    last_iteration: LastIteration = LastIteration.STEP
    refresh_image: RefreshImage = RefreshImage.AFTER_STEP
    kl_reference: KLReference = KLReference.CLEAN
    early_stop_check: EarlyStopCheck = EarlyStopCheck.REFRESH_REPLY
    stop_on_update: bool = False  # forced_argmax: a wrong argmax answer stops at the next refresh (reference flag)
    success: SuccessRule = SuccessRule.OBJECTIVE

    def __post_init__(self) -> None:  # a value given by name (Python callers) becomes the member
        for f in fields(self):
            if isinstance(f.default, Enum):
                object.__setattr__(self, f.name, type(f.default)(getattr(self, f.name)))

    @classmethod
    def from_config(cls, node: Any) -> LoopRules:
        """The rules of an `attack.loop` node (None: the project's), each value type-checked."""
        if node is None:
            return cls()
        if not isinstance(node, dict):
            raise ConfigError(f"attack.loop must be a config of conf/attack/loop/ (choose it with "
                              f"attack/loop=reference, not attack.loop=...); got {node!r}")
        return typed_instance(cls, node, "attack.loop")

    @property
    def folder_label(self) -> str:
        return folder_label(self.name)

    def refresh_due(self, iteration: int, update_every: int) -> bool:
        """Whether iteration `iteration` (0-based) refreshes the pseudo-target."""
        due = (iteration + 1) % update_every == 0
        return due and (self.refresh_image is RefreshImage.AFTER_STEP or iteration > 0)

    def steps(self, iteration: int, total: int) -> bool:
        """Whether iteration `iteration` of `total` ends with a signed step."""
        return iteration < total - 1 or self.last_iteration is LastIteration.STEP

    def success_rule(self, objective: Any) -> str:
        """The rule `success` follows, in words (the summary line prints it)."""
        return objective.success_rule if self.success is SuccessRule.OBJECTIVE else WRONG_ANSWER_RULE

    def settings(self) -> dict[str, Any]:
        """Every rule as JSON-able values (recorded for resume)."""
        return {k: v.value if isinstance(v, Enum) else v for k, v in asdict(self).items()}
