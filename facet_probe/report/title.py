"""The title of a report and of its explorer page: which models, on which facets and datasets, with which
settings (the run folders' names), so a page read on its own says what it is about."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from facet_probe.store.run_folder import RunFolder

#: Up to this many names are spelt out; more are counted ("6 facets").
SHOWN = 3


def names(values: Iterable[object], noun: str) -> str:
    """'a', 'a, b' or '<n> <noun>s' for the distinct values (missing ones left out)."""
    distinct = sorted({str(v) for v in values if v is not None and not (isinstance(v, float) and pd.isna(v))})
    if not distinct:
        return ""
    return ", ".join(distinct) if len(distinct) <= SHOWN else f"{len(distinct)} {noun}s"


def title(kind: str, models: Iterable[object], facets: Iterable[object], datasets: Iterable[object],
          settings: Sequence[str]) -> str:
    """'facet_probe <kind>: <models> on <facets> / <datasets> (<settings>)', leaving out what is not known."""
    who = names(models, "model")
    scope = " / ".join(part for part in (names(facets, "facet"), names(datasets, "dataset")) if part)
    what = " on ".join(part for part in (who, scope) if part)
    where = ", ".join(settings) if len(settings) <= SHOWN else f"{len(settings)} runs"
    return f"facet_probe {kind}: {what} ({where})" if what else f"facet_probe {kind}: {where}"


def trials_title(kind: str, trials: pd.DataFrame, settings: Sequence[str]) -> str:
    """The title of a report over these trials (their models, facets and datasets)."""
    def column(name: str) -> list:
        return list(trials[name].unique()) if name in trials else []

    return title(kind, column("model"), column("facet"), column("dataset"), settings)


def folders_title(kind: str, paths: Sequence[Path]) -> str:
    """The title of a page over run folders, from what each one's `run_status.json` records (an input without
    one, an attack run or a trials file, adds its name only)."""
    statuses = [RunFolder(p if p.is_dir() else p.parent).status() for p in paths]
    cells = [c for s in statuses for c in s.cells]
    models = [m for s in statuses for m in s.models]
    return title(kind, models, [c.facet for c in cells], [c.dataset for c in cells], [p.name for p in paths])
