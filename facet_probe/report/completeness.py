"""What a report lacks against its run's scope (per cell: trials expected and missing, items scored on fewer
orderings than asked) and the notes that say so at the top of report.md."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from facet_probe.core.untrusted import markdown_text
from facet_probe.metrics.flips import CELL_KEYS
from facet_probe.scoring.run_trials import RunScope, completeness


@dataclass
class Completeness:
    """What a report lacks against its scope: per-cell counts and the items scored on fewer trials."""

    cells: pd.DataFrame | None = None
    short_items: pd.DataFrame | None = None

    @classmethod
    def of(cls, trials: pd.DataFrame, scope: RunScope | None) -> Completeness:
        if scope is None or scope.expected.empty:
            return cls()
        cells, short = completeness(trials, scope)
        return cls(cells, short)

    @property
    def missing(self) -> int:
        return 0 if self.cells is None else int(self.cells["n_trials_missing"].sum())

    def annotate(self, summary: pd.DataFrame) -> pd.DataFrame:
        """summary.csv with n_trials_expected / n_trials_missing / n_items_short per cell (a cell with no
        trial at all still gets its line)."""
        if self.cells is None:
            return summary
        merged = summary.merge(self.cells, on=CELL_KEYS, how="outer")
        merged["n_items"] = merged["n_items"].fillna(0).astype(int)
        return merged

    def notes(self, scope: RunScope | None, left_out: int) -> list[str]:
        """Paragraphs for the top of report.md: the shard, what is missing, what was left out (names and ids shown
        as written, `core.untrusted`)."""
        notes = []
        if scope is not None and scope.shard:
            items = scope.expected["item_id"].nunique()
            notes.append(f"**Shard {scope.shard} only.** This report covers {items} of the run's "
                         f"{scope.run_items} items. The whole run's report: `python -m facet_probe.report "
                         "input=<run folder>` once every shard is done (it merges the shard files).")
        if self.missing and self.cells is not None and self.short_items is not None:
            cells = self.cells[self.cells["n_trials_missing"] > 0]
            lines = [f"- {markdown_text(f'{r.model} / {r.facet} / {r.dataset}')}: {r.n_trials_missing} of "
                     f"{r.n_trials_expected} trials missing; {_count(r.n_items_short, 'item')} scored on fewer "
                     "orderings than asked"
                     for r in cells.itertuples()]
            ids = self.short_items["item_id"].astype(str).unique()
            shown = ", ".join(map(markdown_text, ids[:20])) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
            notes.append(f"**Incomplete: {_count(self.missing, 'trial')} missing** (calls that failed for "
                         "good, or were never made). Re-run the same command to retry them; "
                         "`missing_trials.csv` lists the items.\n\n" + "\n".join(lines)
                         + f"\n\nItems scored on fewer orderings: {shown}.")
        for name, short in (scope.shortfalls if scope is not None else {}).items():
            notes.append(f"**Dataset {markdown_text(name)}: {short['found']} of the {short['asked']} items asked** "
                         "pass its filter (audited with `dataset.allow_partial=true`); its cells cover those only.")
        if left_out:
            notes.append(f"{left_out} stored trials of other settings (another K, seed, model "
                         "fingerprint or manifest) are in the trials file and were left out of this report.")
        return notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
