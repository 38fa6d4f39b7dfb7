"""An audit's intervals have a seed of their own (`bootstrap_seed`, INERT), not the manifest's `seed`: its default
is the project's one interval seed (`metrics.INTERVAL_SEED`, the report's and the paper's too), a new value
redraws only the intervals, in the same run folder, with no call."""

from __future__ import annotations

import pandas as pd
import pytest

from facet_probe import api
from facet_probe.metrics.flips import INTERVAL_SEED

AUDIT = ["model=seeded_random", "limit=4", "progress=false", "bootstrap=200"]


@pytest.mark.slow
def test_bootstrap_seed_redraws_the_intervals_and_nothing_else(tmp_path):
    first = api.audit([*AUDIT, f"out_root={tmp_path}"])
    trials = (first.run_dir / "trials.jsonl").read_text()
    same = api.audit([*AUDIT, f"out_root={tmp_path}", f"bootstrap_seed={INTERVAL_SEED}"])  # the default
    other = api.audit([*AUDIT, f"out_root={tmp_path}", "bootstrap_seed=7"])
    assert same.run_dir == other.run_dir == first.run_dir  # INERT: it names no folder and re-asks nothing
    assert (first.run_dir / "trials.jsonl").read_text() == trials
    pd.testing.assert_frame_equal(same["summary"], first["summary"])
    intervals = [c for c in first["summary"].columns if c.endswith(("_lo", "_hi"))]
    assert other["summary"][intervals].ne(first["summary"][intervals]).any(axis=None), "other draws, other intervals"
    keep = [c for c in first["summary"].columns if c not in intervals]
    pd.testing.assert_frame_equal(other["summary"][keep], first["summary"][keep])  # the estimates stay
