"""The fast likelihood layout (blocked one-pass Op, item terms repeated to pairs): the same log density and gradient
as the PyTensor graph with gathers, on every backend."""

import jax
import numpy as np
import pytest
from pymc.sampling.jax import get_jaxified_logp

from facet_probe.odi.data import build_odi_data
from facet_probe.odi.kernel import (
    AUTO_BLOCKED_CELLS,
    LoglikKernel,
    _numpy_pass,
    blocked_counts,
    jax_pass,
    parse_kernel,
    resolve_kernel,
)
from facet_probe.odi.model import PairSpread, build_model
from facet_probe.odi.simulate import SimSpec, simulate

FAST = "FAST_COMPILE"  # Python perform / L_op, no C compilation: the test checks values, not speed
SPEC = SimSpec(n_models=5, facets=("option_order", "evidence_chunk_order"), items_per_facet=6,
               datasets_per_facet=2, sigma_pi=(0.3, 1.0), position_bias=((0.3, 0.0, -0.3),) * 2, seed=4)


def _logp_and_grad(model, point):
    """The PyTensor backends' (PyMC NUTS, ADVI) log density and gradient at `point`: one compiled function
    (perform and L_op) for both, as the samplers compile them."""
    return model.compile_fn([model.logp(), model.dlogp()], mode=FAST)(point)


def _points(model, seed=3):
    start = model.initial_point()
    rng = np.random.default_rng(seed)
    return {v.name: start[v.name] + 0.3 * rng.normal(size=np.shape(start[v.name])) for v in model.value_vars}


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["paper", "positional"])
def test_blocked_kernel_has_the_graph_kernels_logp_and_gradient(variant):
    sim = simulate(SPEC)
    data = build_odi_data(sim.trials, "correct", sim.facts, positional=variant == "positional")
    assert data.dense_counts() is not None  # the dense grid: the path the blocked Op replaces
    models = {k: build_model(data, variant, kernel=k) for k in (LoglikKernel.blocked, LoglikKernel.graph)}
    point = _points(models[LoglikKernel.graph])
    # the PyTensor backends (PyMC NUTS, ADVI): perform and L_op
    (b_logp, b_grad), (g_logp, g_grad) = (_logp_and_grad(models[k], point) for k in models)  # blocked, graph
    assert b_logp == pytest.approx(g_logp, rel=1e-6)
    np.testing.assert_allclose(b_grad, g_grad, rtol=1e-4, atol=1e-3)
    # the JAX backend (nutpie jax, numpyro): the scan pass under its custom VJP, jitted as those samplers do
    jax_out = {}
    for k, m in models.items():
        values = [point[v.name] for v in m.value_vars]
        jax_out[k] = jax.jit(jax.value_and_grad(get_jaxified_logp(m, negative_logp=False)))(values)
    (v_b, g_b), (v_g, g_g) = jax_out[LoglikKernel.blocked], jax_out[LoglikKernel.graph]
    assert float(v_b) == pytest.approx(float(v_g), rel=1e-6)
    for a, b in zip(g_b, g_g, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-3)


def test_the_jax_pass_matches_numpy_across_padded_blocks():
    rng = np.random.default_rng(0)
    n_models, n_pairs = 5, 37  # 37 pairs in blocks of 8: the last block is padded with n = 0
    succ = rng.integers(0, 3, (n_models, n_pairs))
    trials = succ + rng.integers(0, 2, (n_models, n_pairs))
    y, n = blocked_counts(succ, trials, block=8)
    theta, alpha, offset = rng.normal(size=n_models), np.exp(0.3 * rng.normal(size=n_pairs)), rng.normal(size=n_pairs)
    value, grads = jax.value_and_grad(jax_pass(), argnums=(0, 1, 2))(theta, alpha, offset, y, n)
    want = _numpy_pass(theta, alpha, offset, y, n)
    assert float(value) == pytest.approx(want[0], rel=1e-6)
    for got, ref in zip(grads, want[1:], strict=True):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-4, atol=1e-4)


def test_an_unknown_kernel_names_the_choices():
    assert parse_kernel("graph") is LoglikKernel.graph
    with pytest.raises(ValueError, match="auto, blocked, graph"):
        parse_kernel("fused")


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["paper", "positional"])
def test_repeating_item_terms_to_pairs_gives_the_gathered_models_logp_and_gradient(variant):
    sim = simulate(SPEC)
    data = build_odi_data(sim.trials, "correct", sim.facts, positional=variant == "positional")
    models = {gather: build_model(data, variant, kernel=LoglikKernel.blocked, gather=gather) for gather in (True, False)}
    assert not PairSpread(data, gather=True).regular and PairSpread(data).regular  # every item has every ordering
    point = _points(models[True], seed=5)
    (logp, grad), (gathered_logp, gathered_grad) = (_logp_and_grad(models[g], point) for g in (False, True))
    assert logp == pytest.approx(gathered_logp, rel=1e-9)
    np.testing.assert_allclose(grad, gathered_grad, rtol=1e-7, atol=1e-7)


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_an_item_missing_an_ordering_is_gathered():
    trials = simulate(SPEC).trials
    first = trials["item_id"].iloc[0]
    trials = trials[~((trials["item_id"] == first) & (trials["ordering_idx"] == 1))]
    data = build_odi_data(trials, "correct")
    assert not PairSpread(data).regular
    model = build_model(data, "paper")
    assert np.isfinite(model.compile_logp(mode=FAST)(_points(model)))


def test_auto_takes_the_blocked_op_on_large_grids_only():
    assert resolve_kernel(LoglikKernel.auto, AUTO_BLOCKED_CELLS) is LoglikKernel.blocked
    assert resolve_kernel(LoglikKernel.auto, AUTO_BLOCKED_CELLS - 1) is LoglikKernel.graph
    assert resolve_kernel(LoglikKernel.blocked, 10) is LoglikKernel.blocked
