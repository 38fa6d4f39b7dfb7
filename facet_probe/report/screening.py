"""The image-set screen applied to trials: items whose question refers to image positions (their
`position_screen` verdict, `facet_probe.datasets.screen`) leave a report's headline numbers."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from facet_probe.store.reading import ItemKey, item_keys_in

#: The `position_screen` verdict of an item the report leaves out.
SCREEN_EXCLUDE = "exclude"


def screened_out(items: Mapping[ItemKey, dict]) -> set[ItemKey]:
    """Keys of the items the image-set position-reference screen excludes."""
    out = set()
    for key, rec in items.items():
        verdict = (rec.get("metadata") or {}).get("position_screen")
        if isinstance(verdict, dict):
            verdict = verdict.get("verdict")
        if verdict == SCREEN_EXCLUDE:
            out.add(key)
    return out


def screen_trials(trials: pd.DataFrame, items: Mapping[ItemKey, dict]) -> tuple[pd.DataFrame, pd.Series]:
    """The trials the image-set screen keeps (its items' `position_screen` verdicts), and which it drops."""
    excluded = screened_out(items)
    dropped = item_keys_in(trials, excluded) if excluded else pd.Series(False, index=trials.index)
    return (trials[~dropped] if excluded else trials), dropped
