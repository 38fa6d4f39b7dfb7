"""The audit's live counters: flips are tallied per trial, and always equal a recount over every item."""

from __future__ import annotations

import random

from facet_probe.audit.progress import AuditProgress
from facet_probe.core.trials import Trial


def trial(item: int, ordering: int, answer: str, repeat: int = 0, error: str | None = None) -> Trial:
    return Trial(trial_key=f"t{item}-{ordering}-{repeat}", call_key="c", model="m", facet="option_order",
                 dataset="d", item_id=f"d::{item}", ordering_idx=ordering, repeat_idx=repeat, permutation=[0, 1],
                 component_ids=["a", "b"], prompt_hash="h", mode="direct", raw_output="", answer_normalized=answer,
                 parse_status="parse_error" if answer is None else "ok", error=error)


def recount(trials: list[Trial]) -> tuple[int, int]:
    """(flipped, items) the slow way: every item's set of repeat-0 answers, from scratch."""
    answers: dict[str, set] = {}
    for t in trials:
        if not t.error and t.repeat_idx == 0:
            answers.setdefault(t.item_id, set()).add(t.answer_normalized)
    return sum(len(a) > 1 for a in answers.values()), len(answers)


def test_incremental_flip_counts_equal_a_full_recount_after_every_trial():
    rng = random.Random(7)
    trials = [trial(rng.randrange(40), o, rng.choice(["A", "A", "A", "B", "C", None]), repeat=rng.choice([0, 0, 1]),
                    error=rng.choice([None] * 9 + ["HTTP 500"])) for o in range(6) for _ in range(60)]
    rng.shuffle(trials)
    seen = []
    with AuditProgress(total=len(trials), enabled=False) as progress:
        for t in trials:
            progress.update(t)
            seen.append(t)
            assert (progress.flips.flipped, progress.flips.items) == recount(seen)
    assert progress.flips.flipped > 0 and progress.errors > 0
