"""Interval arithmetic behind the decomposition table: |delta| is never reported without its band."""

import numpy as np

from facet_probe.odi.tables import folded_interval, simultaneous_band


def test_simultaneous_band_holds_the_level_jointly():
    rng = np.random.default_rng(0)
    samples = rng.normal(size=(4000, 6))
    lo, hi = simultaneous_band(samples)
    inside = ((samples >= lo) & (samples <= hi)).all(axis=1).mean()
    assert 0.95 <= inside <= 0.96
    marginal_lo, marginal_hi = np.quantile(samples, [0.025, 0.975], axis=0)
    assert (lo < marginal_lo).all() and (hi > marginal_hi).all()  # wider than marginal intervals


def test_folded_interval_includes_zero_when_no_effect_is_distinguishable():
    rng = np.random.default_rng(1)
    null = rng.normal(0, 0.1, size=(2000, 3))
    lo, hi = folded_interval(null)
    assert lo == 0.0 and hi > np.abs(null).mean(axis=1).mean()  # plain posterior mean |delta| is > 0


def test_folded_interval_excludes_zero_for_a_clear_effect():
    rng = np.random.default_rng(2)
    clear = rng.normal([0.5, 0.0, -0.5], 0.05, size=(2000, 3))
    lo, hi = folded_interval(clear)
    assert 0.2 < lo < 1 / 3 < hi < 0.5  # true mean |delta| = 1/3
