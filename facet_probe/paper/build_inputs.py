"""What a paper build reads: its input folders and the tables several targets share, each read once (`Inputs`),
and whether a target reads input folders at all (`published_only`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from facet_probe.metrics.flips import CELL_KEYS
from facet_probe.paper import inputs, policies
from facet_probe.paper.inputs import MissingInput
from facet_probe.report import table1 as t1

log = logging.getLogger("facet_probe.paper")


@dataclass
class Inputs:
    """The run folders of a paper build and what the targets read from them (each read once)."""

    paths: list[Path]
    out: Path
    n_boot: int = 1000
    seed: int = 0
    #: table-mechanism's settings (conf/paper_app.yaml `mechanism`: judges, judge_settings, max_items)
    mechanism: dict = field(default_factory=dict)
    #: which orderings P2, P3 and the K' detector read (conf/paper_app.yaml `mitigation.subsets`)
    subsets: policies.Subsets = policies.Subsets.all

    @functools.cached_property
    def items(self) -> pd.DataFrame:
        return inputs.read_items(self.paths)

    @functools.cached_property
    def policy_items(self) -> pd.DataFrame:
        """Per item of every complete K-ordering cell: each policy's outcome, the K ablation's flips and the
        detector's scores, read as `subsets` says."""
        trials = inputs.read_trials(self.paths)
        grids = policies.cell_grids(trials)
        return pd.concat([policies.item_policies(g, self.subsets) for g in grids.values()], ignore_index=True)

    @functools.cached_property
    def flip_table(self) -> pd.DataFrame:
        """Table 1's long table (its bootstrap is the costly part; Figure 2 draws the same numbers)."""
        return t1.table1(self.items, n_boot=self.n_boot, seed=self.seed)

    @functools.cached_property
    def policy_table(self) -> pd.DataFrame:
        """P1-P6 per cell of K >= 3 orderings (Table 4 and the Pareto front read the same table); cells of fewer
        are left out with a note, none left is MissingInput."""
        items = self.policy_items
        enough = items["k"] >= policies.MIN_POLICY_K
        if not enough.all():
            few = items.loc[~enough].drop_duplicates(CELL_KEYS)
            note = (f"P1-P6 need K >= {policies.MIN_POLICY_K} orderings per cell (P3 is a majority of "
                    f"{policies.MIN_POLICY_K}); {len(few)} cell(s) of K={', '.join(map(str, sorted(set(few['k']))))} "
                    "left out: run the audit with k=6 (the paper's K)")
            if not enough.any():
                raise MissingInput(note)
            log.warning("%s", note)
        return policies.policy_table(items[enough])


#: A paper target: what a build reads -> the files it wrote (tables, figures).
Target = Callable[[Inputs], list[Path]]


def published_only(target: Target) -> Target:
    """Declare a target that reads the package's published data alone, so it needs no `input=`."""
    target.needs_input = False  # type: ignore[attr-defined]
    return target


def needs_input(target: Target) -> bool:
    """Whether a target reads run folders (`input=`); False only for one declared `published_only`."""
    return getattr(target, "needs_input", True)
