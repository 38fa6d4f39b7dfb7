"""The dense ODI log-likelihood as one PyTensor Op: value and gradient from a single pass over the grid.

Autodiff of sum(y * eta - n * softplus(eta)) over the models x pairs grid builds several grid-sized
temporaries and a backward pass over them; at paper scale (389k trials) one gradient cost 2.4x what one
pass that writes the gradient by hand costs (docs/odi.md; on grids under about 25k cells the graph is
quicker). The grid is stored pair-major (pairs x models, models inner), zero-padded to whole blocks of
`block` pairs (the name `blocked` is kept from when the JAX form walked them); the gradient is written by
hand, d/d eta = y - n * sigmoid(eta). The NumPy `perform` serves the PyTensor backends (PyMC NUTS, ADVI);
the JAX form (nutpie's JAX backend, numpyro) is one fused pass over the grid under a custom VJP, so
`value_and_grad` makes one pass. With nutpie's numba backend prefer `odi.kernel=graph` (not measured).
Element-wise terms are float32 (`dtype`), sums float64, as in the graph kernel.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from facet_probe.config.loading import parse_enum
from facet_probe.core.extras import missing

try:  # the [odi] extra: without it, one line naming the pip command (facet_probe.core.extras)
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_type
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.link.jax.dispatch import jax_funcify
except ModuleNotFoundError as exc:
    raise missing(exc, "odi", "facet_probe.odi") from exc


class LoglikKernel(StrEnum):
    """How the dense binomial log-likelihood is evaluated (`odi.kernel`)."""

    auto = "auto"  # the default: blocked from AUTO_BLOCKED_CELLS grid cells up, graph below (docs/odi.md)
    blocked = "blocked"  # this module's one-pass Op (faster per gradient from about 25k grid cells up)
    graph = "graph"  # PyTensor element-wise graph with autodiff (before 2026-12-01; faster on small grids)


#: Grid size (models x pairs) from which `auto` takes the blocked Op. Per gradient (one thread / two at once, the
#: blocked Op with repeats against the graph with gathers, as each runs), YNN fusions off (2026-12-04, docs/odi.md):
#: 10.8k cells 0.47 / 0.38 vs 0.44 / 0.32 ms, 21.6k 0.65 / 0.44 vs 0.65 / 0.49, 32.4k 0.62 / 0.41 vs 0.77 / 0.51.
AUTO_BLOCKED_CELLS = 25_000


def resolve_kernel(kernel: LoglikKernel, grid_cells: int) -> LoglikKernel:
    """`auto` -> blocked for a grid of at least AUTO_BLOCKED_CELLS cells, else graph; others stay."""
    if kernel is not LoglikKernel.auto:
        return kernel
    return LoglikKernel.blocked if grid_cells >= AUTO_BLOCKED_CELLS else LoglikKernel.graph


def parse_kernel(value) -> LoglikKernel:
    """`odi.kernel` as a LoglikKernel; an unknown name is a ConfigError naming the choices."""
    return parse_enum(LoglikKernel, value, "odi.kernel")


#: Grid elements per block (pairs x models). Both passes now read the grid whole, so the block only sets how far the
#: grid is zero-padded (chosen, when the JAX pass walked the blocks, as about 128 KiB of float32, inside L2).
BLOCK_ELEMENTS = 32768


def block_pairs(n_models: int) -> int:
    """Pairs per block for a panel of `n_models` models."""
    return max(16, BLOCK_ELEMENTS // max(n_models, 1))


def blocked_counts(succ: np.ndarray, trials: np.ndarray, block: int, dtype: str = "float32"):
    """(models x pairs) count grids as (n_blocks, block, models) arrays, zero-padded (n = 0 adds nothing)."""
    n_models, n_pairs = succ.shape
    n_blocks = -(-n_pairs // block)
    out = []
    for grid in (succ, trials):
        padded = np.zeros((n_blocks * block, n_models), dtype)
        padded[:n_pairs] = grid.T
        out.append(padded.reshape(n_blocks, block, n_models))
    return out


def _numpy_pass(theta, alpha, offset, succ, trials):
    """(value, d theta, d alpha, d offset) in NumPy float64; the reference the JAX pass is tested against."""
    n_pairs = alpha.shape[0]
    y = succ.reshape(-1, succ.shape[-1])[:n_pairs].astype(np.float64)
    n = trials.reshape(-1, trials.shape[-1])[:n_pairs].astype(np.float64)
    diff = theta[None, :] - offset[:, None]
    eta = alpha[:, None] * diff
    resid = y - n / (1.0 + np.exp(-eta))
    value = float((y * eta - n * np.logaddexp(0.0, eta)).sum())
    weighted = resid * alpha[:, None]
    return value, weighted.sum(axis=0), (resid * diff).sum(axis=1), -weighted.sum(axis=1)


class BlockedBinomialLogit(Op):
    """sum over (pair, model) of y * eta - n * softplus(eta), eta = alpha_pair * (theta_model - offset_pair).

    Inputs: theta (M,), alpha (P,), offset (P,), successes and trials as `blocked_counts` arrays.
    """

    __props__ = ("dtype",)

    def __init__(self, dtype: str = "float32"):
        self.dtype = dtype

    def make_node(self, theta, alpha, offset, succ, trials):  # type: ignore[override]  # Op declares *inputs; this one takes its five
        inputs = [pt.as_tensor_variable(x) for x in (theta, alpha, offset, succ, trials)]
        return Apply(self, inputs, [pt.dscalar()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(_numpy_pass(*inputs)[0], dtype=np.float64)

    def connection_pattern(self, node):
        return [[True], [True], [True], [False], [False]]

    def L_op(self, inputs, outputs, output_grads):
        theta, alpha, offset, succ, trials = inputs
        g = output_grads[0]
        n_pairs = alpha.shape[0]
        y = succ.reshape((-1, succ.shape[-1]))[:n_pairs]
        n = trials.reshape((-1, trials.shape[-1]))[:n_pairs]
        diff = theta[None, :] - offset[:, None]
        resid = y - n * pt.sigmoid(alpha[:, None] * diff)
        weighted = resid * alpha[:, None]
        return [g * weighted.sum(axis=0), g * (resid * diff).sum(axis=1), -g * weighted.sum(axis=1),
                disconnected_type(), disconnected_type()]


def blocked_loglik(theta, alpha_pair, offset_pair, succ_blocks, trials_blocks, dtype: str = "float32"):
    """The Op applied: a float64 scalar PyTensor variable (the counts as arrays, or shared variables that a compiled
    model can swap, model.outcome_data)."""
    return BlockedBinomialLogit(dtype)(theta, alpha_pair, offset_pair, succ_blocks, trials_blocks)


def jax_pass(dtype: str = "float32"):
    """The JAX function (theta, alpha, offset, succ, trials) -> value, with a custom VJP from the same pass.

    One fused pass over the whole grid (pair-major, models inner; the padding rows have n = 0 and add nothing):
    the log-likelihood and the residual y - n * sigmoid(eta) per cell, row sums for the value, and three
    matrix-vector products for the gradients. At 389k trials one gradient took 3.2 ms on one thread, against
    5.5 ms when this walked the blocks with a `lax.scan`, which XLA split into several loops per block (docs/odi.md,
    figures of 2026-12-04)."""
    import jax
    import jax.numpy as jnp

    def one_pass(theta, alpha, offset, succ, trials):
        n_blocks, block, n_models = succ.shape
        n_pairs, rows = alpha.shape[0], n_blocks * block
        acc = theta.dtype
        y, n = succ.reshape(rows, n_models), trials.reshape(rows, n_models)
        a = jnp.pad(alpha.astype(dtype), (0, rows - n_pairs))
        o = jnp.pad(offset.astype(dtype), (0, rows - n_pairs))
        t = theta.astype(dtype)
        eta = a[:, None] * (t[None, :] - o[:, None])
        softplus = jnp.maximum(eta, 0) + jnp.log1p(jnp.exp(-jnp.abs(eta)))
        value = (y * eta - n * softplus).sum(axis=1).astype(acc).sum()
        resid = y - n * jax.lax.logistic(eta)
        by_pair = resid @ jnp.stack([jnp.ones_like(t), t], axis=1)  # (rows, 2): sum_m resid, sum_m resid theta
        g_theta = (a @ resid).astype(acc)
        g_alpha = (by_pair[:n_pairs, 1] - o[:n_pairs] * by_pair[:n_pairs, 0]).astype(alpha.dtype)
        g_offset = (-a[:n_pairs] * by_pair[:n_pairs, 0]).astype(offset.dtype)
        return value, (g_theta, g_alpha, g_offset)

    @jax.custom_vjp
    def loglik(theta, alpha, offset, succ, trials):
        return one_pass(theta, alpha, offset, succ, trials)[0]

    def forward(theta, alpha, offset, succ, trials):
        value, grads = one_pass(theta, alpha, offset, succ, trials)
        return value, grads

    def backward(grads, g):
        g_theta, g_alpha, g_offset = grads
        return ((g * g_theta).astype(g_theta.dtype), (g * g_alpha).astype(g_alpha.dtype),
                (g * g_offset).astype(g_offset.dtype), None, None)

    loglik.defvjp(forward, backward)
    return loglik


@jax_funcify.register(BlockedBinomialLogit)
def _jax_blocked(op, **kwargs):
    return jax_pass(op.dtype)
