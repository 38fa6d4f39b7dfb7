"""The tiny VLM's training curriculum: an ordered list of stages, declared in a YAML file.

The order the skills are learnt in decides whether they are learnt at all (docs/tiny_vlm.md): a stage
is either the synthetic tasks (`sets`: mixing weights of the sets it draws from) or the content-free
copy patterns of `pretrain.py` (`patterns`: shares of captions and labelled lookups, the rest induction).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from facet_probe_dev.tiny_vlm.data import WHITE, Background

DEFAULT_CURRICULUM = Path(__file__).with_name("curricula") / "default.yaml"
PATTERN_KINDS = ("caption", "lookup")


@dataclass(frozen=True)
class Stage:
    """`steps` optimiser steps on either `sets` or `patterns`, the rate warming up to `lr`, then cosine
    down to `min_lr_ratio` x `lr` over the stage (`decay`) or constant."""

    name: str
    steps: int
    lr: float
    sets: dict[str, float] = field(default_factory=dict)
    patterns: dict[str, float] = field(default_factory=dict)
    decay: bool = True
    #: end early once the stage's skills reach this accuracy (0: never): every set's direct teacher-forced
    #: answer accuracy, or the held-out accuracy of every pattern trained
    until: float = 0.0
    #: if `until` is not reached in `steps`: start the stage again from where it started (weights and
    #: optimiser), with new data and a new perturbation, up to this many times. The transitions these
    #: stages wait for come or not depending on small differences (K3 against E1, S4 against S1)
    retries: int = 0
    #: task stages: an attempt whose answers are still below `give_up_below` at step `give_up_at` (0: never)
    #: stops there: a transition that comes at all comes by then (docs/tiny_vlm.md), so a retry is cheaper
    give_up_at: int = 0
    give_up_below: float = 0.0
    #: at the stage's start, theta <- shrink * theta + perturb * theta_fresh on the language model's layer
    #: matrices, and a fresh optimiser state: "shrink and perturb" (Ash & Adams 2020) gives a trained tiny
    #: model back the plasticity to learn a skill its circuits block (docs/tiny_vlm.md, S1)
    shrink: float = 1.0
    perturb: float = 0.0
    #: task stages: a quick generated evaluation on a few test items at the end (logged, not used)
    evaluate: bool = False
    #: start the stage with a fresh optimiser state (no momentum from the stages before)
    fresh_optimizer: bool = False
    #: task stages: the seed of the stage's data (default: from the run's seed and the stage's position).
    #: A stage with its own seed and a fresh optimiser depends on the stages before only through the
    #: weights, so `--init <the checkpoint before it>` trains it exactly as the whole run does
    data_seed: int | None = None
    #: this stage on the fast path even when `TrainConfig.fast` (on by default, every stage) is off: the same
    #: losses with other float rounding, 1.4x per step; on AdamW some transitions did not survive it
    #: (docs/tiny_vlm.md, N1, E), on Muon every stage of the default curriculum did (f1, R1)
    fast: bool = False
    #: task stages: set -> the share of its chain-of-thought replies that answer at once in the CoT template
    #: (``The answer is (X).``, no rationale; `data.target_text`), so that the model can answer a CoT prompt
    #: in both forms, as the paper's CoT models do (docs/tiny_vlm.md, answer-first experiment)
    answer_first: dict[str, float] = field(default_factory=dict)
    #: task stages: set -> a tinted background for its pictures (`data.Background`: `channels` at levels
    #: `low..high`, a `white_share` kept exactly white); its CoT replies answer first iff the level is below `threshold`:
    #: the reply's form decided by a picture feature near its boundary (docs/tiny_vlm.md, issue 45)
    answer_first_background: dict[str, Background] = field(default_factory=dict)

    @property
    def is_copy(self) -> bool:
        return bool(self.patterns) or not self.sets

    def share(self, kind: str) -> float:
        return float(self.patterns.get(kind, 0.0))

    def trained_patterns(self) -> list[str]:
        """The copy patterns this stage draws: induction takes what captions and lookups leave."""
        kinds = [k for k in PATTERN_KINDS if self.share(k) > 0]
        return kinds if sum(map(self.share, kinds)) >= 1 else ["induction", *kinds]


def _problems(stage: Stage, known: set[str]) -> Iterator[str]:
    """Why `stage` cannot run (nothing if it can)."""
    if stage.sets and stage.patterns:
        yield "has both `sets` and `patterns`"
    if stage.steps < 0 or stage.lr <= 0:
        yield f"needs steps >= 0 and lr > 0 (got steps {stage.steps}, lr {stage.lr})"
    if unknown := sorted(set(stage.sets) - known):
        yield f"names unknown sets {unknown} (known: {sorted(known)})"
    if unknown := sorted(set(stage.patterns) - set(PATTERN_KINDS)):
        yield f"names unknown patterns {unknown} (known: {list(PATTERN_KINDS)})"
    if not (0 < stage.shrink <= 1 and stage.perturb >= 0):
        yield f"needs 0 < shrink <= 1 and perturb >= 0 (got shrink {stage.shrink}, perturb {stage.perturb})"
    if not 0 <= stage.until <= 1:
        yield f"needs 0 <= until <= 1 (got {stage.until})"
    if stage.retries < 0 or (stage.retries and not stage.until):
        yield f"needs retries >= 0, and `until` for any (got retries {stage.retries}, until {stage.until})"
    if sum(stage.patterns.values()) > 1:
        yield "has pattern shares adding up to more than 1"
    if stage.data_seed is not None and stage.is_copy:
        yield "sets `data_seed`, which only task stages have (the copy patterns are one stream)"
    if stage.give_up_at < 0 or not 0 <= stage.give_up_below <= 1:
        yield f"needs give_up_at >= 0 and 0 <= give_up_below <= 1 (got {stage.give_up_at}, {stage.give_up_below})"
    if stage.give_up_at and stage.is_copy:
        yield "sets `give_up_at`, which only task stages have"
    if unknown := sorted(set(stage.answer_first) - set(stage.sets)):
        yield f"sets `answer_first` for sets it does not train {unknown} (it trains: {sorted(stage.sets)})"
    if not all(0 <= v <= 1 for v in stage.answer_first.values()):
        yield f"needs answer_first shares in [0, 1] (got {stage.answer_first})"
    if unknown := sorted(set(stage.answer_first_background) - set(stage.sets)):
        yield f"sets `answer_first_background` for sets it does not train {unknown} (it trains: {sorted(stage.sets)})"
    if both := sorted(set(stage.answer_first_background) & set(stage.answer_first)):
        yield f"sets both `answer_first` and `answer_first_background` for {both} (one decides the form)"
    for name, bg in stage.answer_first_background.items():
        if not (0 <= bg.low <= bg.high <= WHITE and 0 <= bg.white_share <= 1 and bg.channels
                and set(bg.channels) <= set("rgb")):
            yield (f"needs 0 <= low <= high <= {WHITE}, white_share in [0, 1] and channels of 'rgb' in "
                   f"answer_first_background.{name} (got {bg})")


def check(stages: Iterable[Stage], known_sets: Iterable[str], where: str) -> list[Stage]:
    """The stages, or a ValueError naming the first stage that cannot run and why."""
    known, stages = set(known_sets), list(stages)
    for stage in stages:
        for problem in _problems(stage, known):
            raise ValueError(f"{where}: stage {stage.name!r} {problem}")
    return stages


def parse(entries: Iterable[Mapping], known_sets: Iterable[str], where: str = "curriculum") -> list[Stage]:
    """Typed stages from plain mappings (a YAML list); unknown keys are an error that names the stage."""
    stages = []
    for i, entry in enumerate(entries):
        try:
            typed = OmegaConf.merge(OmegaConf.structured(Stage), dict(entry))
        except OmegaConfBaseException as err:
            raise ValueError(f"{where}: stage {i} ({dict(entry).get('name', '?')}): {err.msg}") from err
        stages.append(OmegaConf.to_object(typed))
    return check(stages, known_sets, where)


def load(path: str | Path, known_sets: Iterable[str]) -> list[Stage]:
    """The curriculum of a YAML file: a list of stages, or a mapping with a `stages` list (and anchors)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no curriculum file at {path} (the default is {DEFAULT_CURRICULUM})")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    entries = raw.get("stages") if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: expected a non-empty list of stages (or a `stages:` list)")
    return parse(entries, known_sets, str(path))
