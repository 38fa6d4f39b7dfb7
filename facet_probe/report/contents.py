"""What a report is made of (`ReportInputs`: the trials and what is known about them) and how its numbers are
computed (`MetricRules`): the two records every report writer takes (`report.run.write_outputs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from facet_probe.judge.run import JudgeTables
from facet_probe.metrics.flips import INTERVAL_SEED, FewParsed
from facet_probe.scoring.run_trials import RunScope
from facet_probe.store.reading import ItemKey


@dataclass(frozen=True)
class ReportInputs:
    """One report's trials and their context. `items`: the items they answer (screen verdicts, examples);
    `scope`: the run's expected trials, to say what is missing (a shard's scope is labelled as such);
    `left_out`: stored trials of other settings, not read; `provenance`: one record per run
    (`report.provenance.run_provenance`), opening report.md and the explorer page; `judged`: the judges' tables
    of the input run folders (`judge.run.judge_tables_of`)."""

    trials: pd.DataFrame
    items: dict[ItemKey, dict] = field(default_factory=dict)
    title: str = "facet_probe run"
    scope: RunScope | None = None
    left_out: int = 0
    provenance: Sequence[dict] = ()
    judged: JudgeTables | None = None


@dataclass(frozen=True)
class MetricRules:
    """How the numbers are computed: item-bootstrap resamples and their seed for every interval, and what an item
    with fewer than two parsed answers counts as (`metrics.flips.FewParsed`)."""

    n_boot: int = 1000
    seed: int = INTERVAL_SEED
    few_parsed: FewParsed = FewParsed.EXCLUDE
