"""Progress display for audits: a bar with ETA and live flip / parse / error counters."""

from __future__ import annotations

from collections import defaultdict

from tqdm.auto import tqdm

from facet_probe.core.trials import Trial


class FlipTally:
    """Items seen and items that flipped (gave more than one answer at repeat 0), kept up to date per trial
    (O(1) each) instead of recounted over every item."""

    def __init__(self) -> None:
        self.answers: dict[tuple, set[str | None]] = defaultdict(set)  # None: no answer parsed
        self.flipped = 0

    def add(self, key: tuple, answer: str | None) -> None:
        seen = self.answers[key]
        before = len(seen)
        seen.add(answer)
        self.flipped += before == 1 and len(seen) == 2

    @property
    def items(self) -> int:
        return len(self.answers)


class AuditProgress:
    """tqdm bar whose postfix counts items that flipped, answers that parsed, and failed calls."""

    def __init__(self, total: int, done: int = 0, enabled: bool = True, label: str = "") -> None:
        self.enabled = enabled
        self.bar = tqdm(total=total, initial=done, disable=not enabled, desc=label, unit="trial",
                        dynamic_ncols=True, smoothing=0.1)
        self.flips = FlipTally()
        self.parsed = self.scored = self.errors = 0

    def update(self, trial: Trial) -> None:
        if trial.error:
            self.errors += 1
        else:
            self.scored += 1
            self.parsed += trial.parse_status != "parse_error"
            if trial.repeat_idx == 0:
                self.flips.add((trial.facet, trial.item_id), trial.answer_normalized)
        if self.enabled:
            self.bar.set_postfix(flipped=f"{self.flips.flipped}/{self.flips.items}",
                                 parsed=f"{self.parsed}/{self.scored}", errors=self.errors, refresh=False)
        self.bar.update(1)

    def __enter__(self) -> AuditProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
