"""When the trial store forces appended trials to disk (`store.durability`): the policy, resolved per model. Apart
from the store, so the config's schema declares the setting without importing the store."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Durability(StrEnum):
    """When an appended trial is forced to disk (`store.durability`)."""

    per_trial = "per_trial"  # fsync before the next trial: a kill loses at most the line being written
    group = "group"  # fsync every `store.group_trials` trials or `store.group_ms` ms: a kill loses that tail
    auto = "auto"  # per_trial for runners whose calls cost money (they declare it), group for the rest


@dataclass(frozen=True)
class Commit:
    """A resolved commit policy: write + fsync once `every` trials are pending or `ms` ms have passed."""

    every: int = 1
    ms: float = 0.0


PER_TRIAL = Commit()


def commit_policy(durability: Durability | str, paid: bool = False, group_trials: int = 256,
                  group_ms: float = 1000.0) -> Commit:
    """One model's commit policy: `auto` keeps per-trial fsync where the model's answers cost money (`paid`: its
    runner declares `runners.base.CostReporting`, as API runners do; a lost trial is paid for again) and groups
    the others (local models, reference policies)."""
    mode = Durability(durability)
    if mode is Durability.auto:
        mode = Durability.per_trial if paid else Durability.group
    if mode is Durability.per_trial:
        return PER_TRIAL
    return Commit(every=max(1, int(group_trials)), ms=max(0.0, float(group_ms)))
