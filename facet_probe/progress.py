"""Progress display for audits: a bar with ETA and live flip / parse / error counters."""

from __future__ import annotations

from collections import defaultdict

from tqdm.auto import tqdm

from facet_probe.trials import Trial


class AuditProgress:
    """tqdm bar whose postfix counts items that flipped, answers that parsed, and failed calls."""

    def __init__(self, total: int, done: int = 0, enabled: bool = True, label: str = "") -> None:
        self.bar = tqdm(total=total, initial=done, disable=not enabled, desc=label, unit="trial",
                        dynamic_ncols=True, smoothing=0.1)
        self.answers: dict[tuple, set[str]] = defaultdict(set)
        self.parsed = self.scored = self.errors = 0

    def update(self, trial: Trial) -> None:
        if trial.error:
            self.errors += 1
        else:
            self.scored += 1
            self.parsed += trial.parse_status != "parse_error"
            if trial.repeat_idx == 0:
                self.answers[(trial.facet, trial.item_id)].add(trial.answer_normalized)
        flips = sum(len(a) > 1 for a in self.answers.values())
        self.bar.set_postfix(flipped=f"{flips}/{len(self.answers)}",
                             parsed=f"{self.parsed}/{self.scored}", errors=self.errors, refresh=False)
        self.bar.update(1)

    def __enter__(self) -> AuditProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
