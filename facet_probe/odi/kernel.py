"""The dense ODI log-likelihood as one PyTensor Op: value and gradient in a single cache-blocked pass.

Autodiff of sum(y * eta - n * softplus(eta)) over the models x pairs grid builds several grid-sized
temporaries; at paper scale (389k trials) they leave the cache and one gradient cost 2.4x what the
blocked pass costs (docs/odi.md; at 54k trials the graph is quicker). The NumPy `perform` serves the
PyTensor backends (PyMC NUTS, ADVI); with nutpie's numba backend prefer `odi.kernel=graph` (not measured). The Op keeps the grid pair-major (pairs x models, models inner),
walks it in blocks of `block` pairs (JAX: a `lax.scan` under a custom VJP, so `value_and_grad` makes
one pass), and computes the gradient by hand: d/d eta = y - n * sigmoid(eta), sharing exp(-|eta|)
with the softplus. Element-wise terms are float32 (`dtype`), sums float64, as in the graph kernel.
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
    blocked = "blocked"  # this module's fused, cache-blocked Op (2.4x faster per gradient at 389k trials)
    graph = "graph"  # PyTensor element-wise graph with autodiff (before 2026-12-01; faster at 54k trials)


#: Grid size (models x pairs) from which `auto` takes the blocked Op: between the two measured sizes, 54k
#: (graph faster per gradient, 0.84 vs 0.95 ms) and 389k (blocked faster, 4.6 vs 11.0 ms).
AUTO_BLOCKED_CELLS = 200_000


def resolve_kernel(kernel: LoglikKernel, grid_cells: int) -> LoglikKernel:
    """`auto` -> blocked for a grid of at least AUTO_BLOCKED_CELLS cells, else graph; others stay."""
    if kernel is not LoglikKernel.auto:
        return kernel
    return LoglikKernel.blocked if grid_cells >= AUTO_BLOCKED_CELLS else LoglikKernel.graph


def parse_kernel(value) -> LoglikKernel:
    """`odi.kernel` as a LoglikKernel; an unknown name is a ConfigError naming the choices."""
    return parse_enum(LoglikKernel, value, "odi.kernel")


#: Grid elements per block (pairs x models): about 128 KiB per float32 temporary, inside L2.
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

    def make_node(self, theta, alpha, offset, succ, trials):
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
    """The Op applied: a float64 scalar PyTensor variable."""
    return BlockedBinomialLogit(dtype)(theta, alpha_pair, offset_pair, pt.constant(succ_blocks),
                                       pt.constant(trials_blocks))


def jax_pass(dtype: str = "float32"):
    """The JAX function (theta, alpha, offset, succ, trials) -> value, with a custom VJP from the same pass."""
    import jax
    import jax.numpy as jnp

    def one_pass(theta, alpha, offset, succ, trials):
        n_blocks, block, _ = succ.shape
        n_pairs = alpha.shape[0]
        acc = theta.dtype
        pad = n_blocks * block - n_pairs
        a = jnp.pad(alpha.astype(dtype), (0, pad)).reshape(n_blocks, block)
        o = jnp.pad(offset.astype(dtype), (0, pad)).reshape(n_blocks, block)
        t = theta.astype(dtype)

        def body(carry, xs):
            y, n, ab, ob = xs
            diff = t[None, :] - ob[:, None]
            eta = ab[:, None] * diff
            e = jnp.exp(-jnp.abs(eta))
            softplus = jnp.maximum(eta, 0) + jnp.log1p(e)
            resid = y - n * jnp.where(eta >= 0, 1 / (1 + e), e / (1 + e))
            weighted = resid * ab[:, None]
            value = (y * eta - n * softplus).sum(axis=1).astype(acc).sum()
            return (carry[0] + value, carry[1] + weighted.sum(axis=0).astype(acc)), \
                ((resid * diff).sum(axis=1), -weighted.sum(axis=1))

        init = (jnp.zeros((), acc), jnp.zeros(theta.shape, acc))
        (value, g_theta), (g_alpha, g_offset) = jax.lax.scan(body, init, (succ, trials, a, o))
        return value, (g_theta, g_alpha.reshape(-1)[:n_pairs].astype(alpha.dtype),
                       g_offset.reshape(-1)[:n_pairs].astype(offset.dtype))

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
