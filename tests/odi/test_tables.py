"""The decomposition table: |delta| never without its band, the reference's |E delta| beside ours, and the
appendix intervals (hand-built posteriors, no fit)."""

import arviz as az
import numpy as np
import pandas as pd
import pytest

from facet_probe.odi.data import build_odi_data
from facet_probe.odi.tables import (
    decomposition_table,
    folded_interval,
    posterior_interval_table,
    simultaneous_band,
)
from facet_probe.store.table_rules import violations


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


# --- Table 2's two |delta| and the appendix intervals, on hand-built posteriors (issue 60, points 1 and 3) ---

#: orderings per (facet, dataset): evidence_chunk_order's d2 has only 4 of the 6, as a cell of fewer orderings
ORDERINGS = {("option_order", "d1"): 6, ("option_order", "d2"): 6, ("evidence_chunk_order", "d1"): 6,
             ("evidence_chunk_order", "d2"): 4}


def small_panel() -> pd.DataFrame:
    """Two models x two items per (facet, dataset) cell, with the cell's orderings."""
    return pd.DataFrame([{"model": f"m{m}", "facet": f, "dataset": d, "item_id": f"{d}::{f}{i}", "ordering_idx": k,
                          "answer_normalized": "A", "correct": (m + i + k) % 2 == 0}
                         for (f, d), n in ORDERINGS.items() for i in range(2) for k in range(n) for m in range(2)])


def hand_posterior(data, seed: int = 0) -> az.InferenceData:
    """Synthetic draws (2 chains x 400) of every variable the tables read, shaped as the fit's."""
    rng = np.random.default_rng(seed)
    size = (2, 400)
    cells, items, facets = len(data.cells), len(data.items), len(data.facets)
    shift = rng.normal(0, 0.3, (cells, data.n_orderings))  # per-cell-ordering posterior means of both signs
    return az.from_dict(posterior={
        "delta": shift + rng.normal(0, 0.2, (*size, cells, data.n_orderings)),
        "delta_position": rng.normal(0, 0.2, (*size, facets, 3)),
        "sigma_pi": np.exp(rng.normal(-1.5, 0.3, items) + rng.normal(0, 0.2, (*size, items))),
        "sigma_delta": np.abs(rng.normal(0.2, 0.1, (*size, facets)))})


def reference_delta_abs_mean(idata, frame: pd.DataFrame, data) -> dict[str, float]:
    """irt.py `_per_facet_summary`: per facet, the mean over its observed (dataset, ordering) cells of |posterior
    mean of delta|, the cells as the reference's `fdos` (those with trials)."""
    mean = idata.posterior["delta"].mean(dim=("chain", "draw")).values  # (C, K)
    out = {}
    for facet, cells in frame.groupby("facet"):
        fdos = cells[["dataset", "ordering_idx"]].drop_duplicates().itertuples(index=False)
        out[facet] = float(np.mean([abs(mean[data.cells.index(f"{facet}::{d}"), k]) for d, k in fdos]))
    return out


def test_table2_reports_the_references_abs_of_the_posterior_mean_delta_beside_ours():
    """Issue 60.1: `delta_abs_mean` is the reference's |E delta| over the observed cells (12 and 10 here) and
    `delta_ratio_vs_option` its ratio; `mean_abs_delta` stays ours, E mean|delta|, a larger number."""
    frame = small_panel()
    data = build_odi_data(frame, "correct")
    idata = hand_posterior(data)
    table = decomposition_table(idata, data, "paper").set_index("facet")
    expected = reference_delta_abs_mean(idata, frame, data)
    for facet, value in expected.items():
        assert table.loc[facet, "delta_abs_mean"] == pytest.approx(value, rel=1e-9)
    assert table.loc["evidence_chunk_order", "delta_ratio_vs_option"] == pytest.approx(
        expected["evidence_chunk_order"] / expected["option_order"], rel=1e-9)
    assert (table["mean_abs_delta"] > table["delta_abs_mean"]).all()  # E|x| >= |E x|: another quantity


def test_the_positional_variant_has_no_references_delta_abs_mean():
    data = build_odi_data(small_panel(), "correct")
    table = decomposition_table(hand_posterior(data), data, "positional")
    assert "delta_abs_mean" not in table and "delta_ratio_vs_option" not in table
    assert {"mean_abs_delta", "abs_delta_lo", "abs_delta_hi"} <= set(table)


def test_sigma_pi_median_is_the_references_median_of_item_posterior_means():
    """irt.py `_extract_item_params` (sigma_pi = posterior mean of sigma_item) then `_per_facet_summary` (median
    over the facet's items; its sigma_ratio_vs_option divides by option_order's)."""
    data = build_odi_data(small_panel(), "correct")
    idata = hand_posterior(data, seed=1)
    item_means = idata.posterior["sigma_pi"].mean(dim=("chain", "draw")).values
    facet_of = np.asarray(data.facets)[data.item_facet]
    table = decomposition_table(idata, data, "paper").set_index("facet")
    medians = {f: float(np.median(item_means[facet_of == f])) for f in data.facets}
    for facet, value in medians.items():
        assert table.loc[facet, "sigma_pi_median"] == pytest.approx(value, rel=1e-12)
        assert table.loc[facet, "ratio_sigma_pi"] == pytest.approx(value / medians["option_order"], rel=1e-12)


def shortest_interval(x: np.ndarray, prob: float) -> tuple[float, float]:
    """The shortest interval holding floor(prob * n) + 1 of the sorted draws."""
    x = np.sort(x)
    k = int(np.floor(prob * len(x)))
    start = int(np.argmin(x[k:] - x[:len(x) - k]))
    return float(x[start]), float(x[start + k])


def test_the_appendix_intervals_are_the_per_draw_median_of_sigma_pi_and_sigma_delta_with_89_hdis():
    """Issue 60.3 (odi_posterior_interval_audit.md): per facet, the draw-wise median of sigma_item over its items
    and sigma_delta, each with the shortest 89% interval over the pooled draws; the point lies inside."""
    data = build_odi_data(small_panel(), "correct")
    idata = hand_posterior(data, seed=2)
    sigma = idata.posterior["sigma_pi"].values.reshape(800, -1)
    sigma_delta = idata.posterior["sigma_delta"].values.reshape(800, -1)
    table = posterior_interval_table(idata, data, "paper").set_index("facet")
    for j, facet in enumerate(data.facets):
        per_draw = np.median(sigma[:, data.item_facet == j], axis=1)
        row = table.loc[facet]
        assert row["sigma_pi_draw_median"] == pytest.approx(np.median(per_draw))
        assert (row["sigma_pi_draw_median_lo"], row["sigma_pi_draw_median_hi"]) == pytest.approx(
            shortest_interval(per_draw, 0.89))
        assert (row["sigma_delta_median_lo"], row["sigma_delta_median_hi"]) == pytest.approx(
            shortest_interval(sigma_delta[:, j], 0.89))
        for point in ("sigma_pi_draw_median", "sigma_delta_median"):
            assert row[f"{point}_lo"] <= row[point] <= row[f"{point}_hi"]
    assert "sigma_delta_median" not in posterior_interval_table(idata, data, "positional")  # no sigma_delta there


def test_every_interval_of_the_decomposition_holds_its_own_point():
    """Issue 60 / point 8's rule: the sigma_pi intervals are of the per-draw median (`sigma_pi_draw_median`), not of
    the reference's median of item means (`sigma_pi_median`), and name that point."""
    data = build_odi_data(small_panel(), "correct")
    for variant in ("paper", "positional"):
        table = decomposition_table(hand_posterior(data, seed=3), data, variant)
        assert not violations(table)
        assert "sigma_pi_median_q2.5" not in table and "sigma_pi_draw_median_lo" in table
        assert (table["ratio_sigma_pi_draw_median_lo"] <= table["ratio_sigma_pi_draw_median"]).all()
