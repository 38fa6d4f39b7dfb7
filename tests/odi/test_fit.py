"""Sampler backends return usable posteriors with diagnostics (tiny data, real sampling)."""

import importlib.util
import os
import warnings

import numpy as np
import pytest

from facet_probe.core.errors import ConfigError
from facet_probe.odi.data import build_odi_data
from facet_probe.odi.fit import (
    PYTENSOR_NO_BLAS,
    YNN_FUSIONS_OFF,
    FitSettings,
    PyTensorMode,
    diagnostics,
    fit,
    no_pytensor_blas_warning,
    prepare_xla,
    summary,
    xla_flags,
)
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
    """PyMC's NUTS through JAX and ADVI in Python: PyTensor's C modules (its default, `c`) cost 85-190 s of gcc per
    backend on a machine's first run, and no more of our code."""
    mode = {"pymc": "jax", "advi": "fast_compile"}.get(sampler, "c")
    settings = FitSettings(sampler=sampler, draws=20, tune=20, chains=1 if sampler == "advi" else 2,
                           advi_iterations=200, progress=False, cores=1, pytensor_mode=mode)
    idata, wall = fit(model, settings)
    assert idata.posterior.sizes["draw"] == 20 and wall > 0
    table = diagnostics(idata, wall)
    assert {"theta", "beta", "alpha", "sigma_pi", "delta"} <= set(table["parameter"])
    assert (table["ess_bulk_min"] > 0).all()
    head = summary(idata, wall, settings)
    assert head["sampler"] == sampler and head["divergences"] >= 0
    assert not head["converged"]  # 20 draws are never declared converged


def test_settings_reject_unknown_samplers():
    with pytest.raises(ValueError, match="nutpie, numpyro, pymc, advi"):
        FitSettings(sampler="gibbs")


def test_the_pytensor_mode_is_typed_and_advi_is_never_sent_to_jax():
    assert FitSettings(sampler="pymc", pytensor_mode="jax").pytensor_mode is PyTensorMode.jax
    assert FitSettings().pytensor_mode.pytensor_name is None  # c: PyTensor's configured mode, untouched
    assert PyTensorMode.fast_compile.pytensor_name == "FAST_COMPILE"
    with pytest.raises(ConfigError, match="odi.pytensor_mode must be one of c, jax, fast_compile; got 'cuda'"):
        FitSettings(pytensor_mode="cuda")
    with pytest.raises(ValueError, match="for sampler=advi choose c or fast_compile"):
        FitSettings(sampler="advi", pytensor_mode="jax")


def test_xla_flags_turn_ynn_fusions_off_and_keep_the_users_flags():
    assert xla_flags("", "0.10.2") == YNN_FUSIONS_OFF
    assert xla_flags("--xla_dump_to=/tmp/x", "0.11.0").split() == ["--xla_dump_to=/tmp/x", YNN_FUSIONS_OFF]
    # the user's own YNN setting wins; a jaxlib older than the one measured (or unknown) is never given the flag,
    # since XLA aborts the process on a flag it does not know
    assert xla_flags("--xla_cpu_experimental_ynn_fusion_type=individual_dot", "0.10.2") == \
        "--xla_cpu_experimental_ynn_fusion_type=individual_dot"
    assert xla_flags("", "0.4.30") == "" and xla_flags("", None) == "" and xla_flags("", "not-a-version") == ""
    # numpyro's parallel chains: one CPU device per chain, unless the user set a count
    assert xla_flags("", "0.4.30", devices=2) == "--xla_force_host_platform_device_count=2"
    assert xla_flags("--xla_force_host_platform_device_count=8", "0.4.30", devices=2) == \
        "--xla_force_host_platform_device_count=8"


def test_prepare_xla_sets_the_flags_though_jax_is_imported(monkeypatch):
    """Importing the ODI modules imports jax (the kernel registers its JAX form), so 'jax in sys.modules' cannot
    say whether XLA still reads its flags; only a started backend can. The numpyro path once tested the import
    and so never set its one-device-per-chain count."""
    import sys

    from jax._src import xla_bridge

    assert "jax" in sys.modules
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: False)
    prepare_xla(devices=2)
    flags = os.environ["XLA_FLAGS"].split()
    assert flags[0] == "--xla_dump_to=/tmp/x" and "--xla_force_host_platform_device_count=2" in flags
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: True)  # too late: XLA has read them
    prepare_xla(devices=2)
    assert os.environ["XLA_FLAGS"] == ""


def test_pytensors_no_blas_warning_stays_out_of_the_jax_and_numba_fits():
    """PyTensor warns once a process when it finds no BLAS for its C code (a pip install); the nutpie and numpyro
    fits compile through JAX or numba, which bring their own, so the ODI app's output no longer ends with it."""
    from pytensor.link.c.cmodule import default_blas_ldflags

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with no_pytensor_blas_warning():
            inside = default_blas_ldflags()
        outside = default_blas_ldflags()  # PyTensor's own words: the pattern must still match them
    no_blas = [w for w in seen if PYTENSOR_NO_BLAS in str(w.message)]
    assert inside == outside
    assert len(no_blas) == (0 if outside else 1)  # where no BLAS is found, the warning comes from outside only


class StandInCompile:
    """A compiled model that records the data it was given (nutpie's `with_data` contract), compiling nothing."""

    def __init__(self, model, data=None):
        self.model, self.data = model, data

    def with_data(self, **data):
        return StandInCompile(self.model, data)


def test_an_outcome_whose_model_differs_only_in_its_data_reuses_the_earlier_compile():
    """Issue 64.5: the ODI app's second outcome samples through the first's compile with its own counts; a model
    whose graph differs (another variant here) compiles anew."""
    from facet_probe.odi.fit import CompiledModels
    from facet_probe.odi.outcome import ModalRule

    trials = simulate(SPEC).trials
    correct, modal = (build_model(build_odi_data(trials, o, modal_rule=ModalRule.break_ties), "paper")
                      for o in ("correct", "modal"))
    kept = CompiledModels()
    first = kept.compiled_for(correct, StandInCompile)
    second = kept.compiled_for(modal, StandInCompile)
    assert kept.compiles == 1 and second.model is correct
    assert set(second.data) == {v.name for v in modal.data_vars} >= {"successes", "trials"}
    assert not np.array_equal(second.data["successes"], correct["successes"].get_value())  # the modal counts
    for name, value in second.data.items():
        np.testing.assert_array_equal(value, modal[name].get_value())
    other = build_model(build_odi_data(trials, "correct"), "paper", scales="noncentred")
    assert kept.compiled_for(other, StandInCompile).model is other and kept.compiles == 2
    assert first.data is None
