"""Sampler backends return usable posteriors with diagnostics (tiny data, real sampling)."""

import importlib.util

import pytest

from facet_probe.odi.data import build_odi_data
from facet_probe.odi.fit import FitSettings, diagnostics, fit, summary
from facet_probe.odi.model import build_model
from facet_probe.odi.simulate import SimSpec, simulate

SPEC = SimSpec(n_models=4, facets=("option_order",), items_per_facet=6, datasets_per_facet=1, sigma_pi=(0.5,),
               seed=7)


@pytest.fixture(scope="module")
def model():
    return build_model(build_odi_data(simulate(SPEC).trials, "correct"), "paper")


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["nutpie", "pymc", "advi",
                                     pytest.param("numpyro", marks=pytest.mark.skipif(
                                         importlib.util.find_spec("numpyro") is None, reason="numpyro absent"))])
def test_each_backend_returns_draws_and_diagnostics(model, sampler):
    settings = FitSettings(sampler=sampler, draws=40, tune=40, chains=1 if sampler == "advi" else 2,
                           advi_iterations=500, progress=False, cores=1)
    idata, wall = fit(model, settings)
    assert idata.posterior.sizes["draw"] == 40 and wall > 0
    table = diagnostics(idata, wall)
    assert {"theta", "beta", "alpha", "sigma_pi", "delta"} <= set(table["parameter"])
    assert (table["ess_bulk_min"] > 0).all()
    head = summary(idata, wall, settings)
    assert head["sampler"] == sampler and head["divergences"] >= 0
    assert not head["converged"]  # 40 draws are never declared converged


def test_settings_reject_unknown_samplers():
    with pytest.raises(ValueError, match="nutpie, numpyro, pymc, advi"):
        FitSettings(sampler="gibbs")
