"""Recovery on simulated panels (small sizes; experiments/odi_recovery.py runs the full size), and the
null check: without systematic ordering bias, |delta| and its ratios come with intervals that include
the null."""

import pytest

from facet_probe.odi.fit import FitSettings
from facet_probe.odi.recover import run_recovery
from facet_probe.odi.simulate import SimSpec

FACETS = ("option_order", "evidence_chunk_order", "image_set_order")
SETTINGS = FitSettings(draws=150, tune=150, chains=2, seed=1, progress=False)


def spec(**kw) -> SimSpec:
    base = dict(n_models=18, facets=FACETS, datasets_per_facet=1, items_per_facet=30, sigma_pi=(0.25, 0.6, 1.2))
    return SimSpec(**{**base, **kw})


@pytest.mark.slow
def test_positional_variant_recovers_theta_sigma_order_and_position_bias():
    bias = ((0.6, 0.0, -0.6), (0.0, 0.0, 0.0), (-0.5, 0.1, 0.4))
    rec = run_recovery(spec(position_bias=bias, seed=11), "positional", SETTINGS)
    m, table = rec.metrics, rec.decomposition.set_index("facet")
    assert m["theta_corr"] > 0.9
    assert m["sigma_pi_facet_order_recovered"]
    assert m["delta_position_coverage"] >= 7 / 9
    assert m["abs_delta_max_abs_error"] < 0.2
    assert table.loc["option_order", "bias_credible"] and table.loc["option_order", "abs_delta_lo"] > 0
    assert table.loc["evidence_chunk_order", "abs_delta_lo"] == 0  # the unbiased facet is not flagged


@pytest.mark.slow
def test_paper_variant_recovers_theta_and_the_sigma_order():
    rec = run_recovery(spec(ordering_bias_sd=0.2, seed=12), "paper", SETTINGS)
    assert rec.metrics["theta_corr"] > 0.9
    assert rec.metrics["sigma_pi_facet_order_recovered"]
    # delta is identified only through its priors: reported with its band, not checked against the truth


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["positional", "paper"])
def test_null_check_intervals_include_no_bias(variant):
    rec = run_recovery(spec(items_per_facet=20, sigma_pi=(0.25, 0.5, 0.8), seed=13), variant,
                       FitSettings(draws=100, tune=100, chains=2, seed=2, progress=False))
    table = rec.decomposition
    assert (table["mean_abs_delta"] > 0).all()  # a bare posterior mean |delta| is always positive ...
    assert (table["abs_delta_lo"] == 0).all() and not table["bias_credible"].any()  # ... its band includes 0
    assert ((table["ratio_abs_delta_lo"] <= 1) & (table["ratio_abs_delta_hi"] >= 1)).all()
