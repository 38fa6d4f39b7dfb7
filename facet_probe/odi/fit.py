"""Sampler backends (nutpie, numpyro, PyMC NUTS, ADVI) and convergence diagnostics.

Every backend returns ArviZ InferenceData with a `posterior` group and shows progress while it runs.
`advi` is a quick first look: mean-field, under-dispersed intervals, no R-hat; use NUTS for results.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from facet_probe.config.loading import parse_enum
from facet_probe.core.extras import installed, missing, require
from facet_probe.core.interrupts import ctrl_c_held
from facet_probe.odi.convergence import Convergence

try:  # the [odi] extra: without it, one line naming the pip command (facet_probe.core.extras)
    import arviz as az
    import pymc as pm
except ModuleNotFoundError as exc:
    raise missing(exc, "odi", "facet_probe.odi") from exc

SAMPLERS = ("nutpie", "numpyro", "pymc", "advi")
#: Parameters every table reads; their diagnostics decide whether a fit is usable.
REPORTED = ("theta", "beta", "alpha", "sigma_pi", "mu_log_sigma", "tau_log_sigma", "sigma_beta", "mu_beta",
            "sigma_delta", "delta", "delta_position")


class MassMatrix(StrEnum):
    """nutpie's mass matrix adaptation (`odi.mass_matrix`; other samplers take their own diagonal)."""

    diag = "diag"  # the default: diagonal, from draws and gradients
    low_rank = "low_rank"  # diagonal plus low-rank corrections (nutpie's low_rank_modified_mass_matrix)


def parse_mass_matrix(value) -> MassMatrix:
    """`odi.mass_matrix` as a MassMatrix; an unknown name is a ConfigError naming the choices."""
    return parse_enum(MassMatrix, value, "odi.mass_matrix")


class PyTensorMode(StrEnum):
    """How PyTensor compiles the model for `sampler=pymc` and `advi` (`odi.pytensor_mode`; nutpie and numpyro
    compile their own)."""

    c = "c"  # PyTensor's own mode (FAST_RUN unless PYTENSOR_FLAGS say): C modules, minutes of gcc on a first fit
    jax = "jax"  # through JAX: no C compiler, seconds to compile; PyMC's NUTS only (ADVI's updates do not trace)
    fast_compile = "fast_compile"  # Python implementations, nothing compiled: slow steps, for tiny models

    @property
    def pytensor_name(self) -> str | None:
        """PyTensor's name of the mode; None for `c` (whatever PyTensor is configured with)."""
        return {"jax": "JAX", "fast_compile": "FAST_COMPILE"}.get(self.value)


def parse_pytensor_mode(value) -> PyTensorMode:
    """`odi.pytensor_mode` as a PyTensorMode; an unknown name is a ConfigError naming the choices."""
    return parse_enum(PyTensorMode, value, "odi.pytensor_mode")


@dataclass(frozen=True)
class FitSettings:
    """How to sample (mirrors `conf/odi/*.yaml` `sampler` settings)."""

    sampler: str = "nutpie"
    draws: int = 1000
    tune: int = 300  # nutpie's default; enough at paper scale (docs/odi.md, 2026-12-04)
    chains: int = 4
    cores: int | None = None  # None: min(chains, CPUs)
    seed: int = 0
    target_accept: float = 0.8
    nutpie_backend: str = "auto"  # auto (jax when installed, else numba) | numba | jax
    advi_iterations: int = 30000
    progress: bool = True
    mass_matrix: MassMatrix = MassMatrix.diag  # nutpie only
    pytensor_mode: PyTensorMode = PyTensorMode.c  # pymc and advi only
    smoke: bool = False  # a smoke fit (conf/odi/smoke.yaml): tiny settings, unconverged by design, labelled so

    def __post_init__(self) -> None:
        object.__setattr__(self, "mass_matrix", parse_mass_matrix(self.mass_matrix))
        object.__setattr__(self, "pytensor_mode", parse_pytensor_mode(self.pytensor_mode))
        if self.sampler == "advi" and self.pytensor_mode is PyTensorMode.jax:
            raise ValueError("odi.pytensor_mode=jax does not compile ADVI's updates; for sampler=advi choose c or "
                             "fast_compile")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        if self.draws < 1 or self.chains < 1 or self.tune < 0:
            raise ValueError(f"need draws >= 1, chains >= 1, tune >= 0; got {self.draws}, {self.chains}, {self.tune}")

    @property
    def n_cores(self) -> int:
        return self.cores or min(self.chains, os.cpu_count() or 1)


def fit(model: pm.Model, settings: FitSettings, compiled: CompiledModels | None = None
        ) -> tuple[az.InferenceData, float]:
    """Sample the model; returns (InferenceData, sampling wall seconds, compilation excluded where separable).
    `compiled`: nutpie's compiles of earlier fits, reused where this model differs from one only in its data."""
    # nutpie and PyMC take Ctrl-C as "stop and return the draws so far", which the tables would read as the fit
    with ctrl_c_held(forward=True):
        if settings.sampler == "nutpie":
            return _nutpie(model, settings, compiled or CompiledModels())
        return {"numpyro": _numpyro, "pymc": _pymc, "advi": _advi}[settings.sampler](model, settings)


#: XLA:CPU's YNNPACK library fusions off: with them (jaxlib 0.10), two chains' gradients at 389k trials took about
#: 1.3x as long, their small dots and reductions each a library call (docs/odi.md, "XLA settings").
YNN_FUSIONS_OFF = "--xla_cpu_experimental_ynn_fusion_type="
#: The first jaxlib measured with that flag; an older one may not know it, and XLA aborts on an unknown flag.
YNN_FLAG_SINCE = (0, 10, 2)


def xla_flags(current: str, jaxlib_version: str | None, devices: int | None = None) -> str:
    """XLA_FLAGS for an ODI fit: the user's own flags kept, YNN fusions off where this jaxlib has the flag and the
    user said nothing of them, and (numpyro) one CPU device per chain unless the user set a count."""
    flags = current.split()
    if devices and not any(f.startswith("--xla_force_host_platform_device_count") for f in flags):
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    if _version_tuple(jaxlib_version) >= YNN_FLAG_SINCE and not any("ynn_fusion_type" in f for f in flags):
        flags.append(YNN_FUSIONS_OFF)
    return " ".join(flags)


def _version_tuple(version: str | None) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); None or an unreadable version -> () (older than any)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).release if version else ()
    except InvalidVersion:
        return ()


def prepare_xla(devices: int | None = None) -> None:
    """Set XLA_FLAGS (`xla_flags`) while JAX's CPU backend has not started; once it runs they are read already."""
    from importlib.metadata import PackageNotFoundError, version

    if "jax" in sys.modules:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            return
    try:
        jaxlib = version("jaxlib")
    except PackageNotFoundError:
        return
    os.environ["XLA_FLAGS"] = xla_flags(os.environ.get("XLA_FLAGS", ""), jaxlib, devices)


#: PyTensor's warning, once per process, that it found no BLAS for its C code (a pip install). nutpie and numpyro
#: compile through JAX or numba, which bring their own, so their fits keep it out of the app's output; it still
#: shows for `sampler=pymc` and `advi` in mode `c`, whose C code it concerns.
PYTENSOR_NO_BLAS = "PyTensor could not link to a BLAS installation"


@contextmanager
def no_pytensor_blas_warning() -> Iterator[None]:
    """PyTensor's no-BLAS warning silenced (for the JAX and numba compilations, which do not use that BLAS)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=PYTENSOR_NO_BLAS, category=UserWarning)
        yield


def resolve_backend(backend: str) -> str:
    """`auto` -> jax when jax is installed (about 2x faster gradients here), else numba."""
    if backend not in ("auto", "jax", "numba"):
        raise ValueError(f"nutpie_backend must be auto, jax or numba; got {backend!r}")
    if backend != "auto":
        return backend
    return "jax" if installed("jax") else "numba"


def same_but_data(a: pm.Model, b: pm.Model) -> bool:
    """Whether model b is model a with other values in its data variables: the same coordinates, data shapes and
    graphs of the log density and the deterministics (constants compared by value)."""
    from pytensor.graph.basic import equal_computations

    def names(m: pm.Model) -> tuple:
        return (m.coords, [(v.name, v.type) for v in m.data_vars], [v.name for v in m.value_vars],
                [d.name for d in m.deterministics])

    if names(a) != names(b):
        return False

    def graphs(m: pm.Model) -> tuple[list, list]:  # (outputs, the inputs that may differ as objects)
        return ([m.logp(), *m.replace_rvs_by_values(m.deterministics)],
                [*m.data_vars, *m.value_vars, *(m.dim_lengths[d] for d in sorted(m.dim_lengths))])

    (outputs_a, inputs_a), (outputs_b, inputs_b) = graphs(a), graphs(b)
    return equal_computations(outputs_a, outputs_b, inputs_a, inputs_b)


@dataclass
class CompiledModels:
    """nutpie's compiles in one run: a model that differs from an earlier one only in its data (the other outcome of
    the same panel) samples through the earlier compile with its own data (nutpie's `with_data`), which skips
    turning the graph into JAX and XLA's compile (docs/odi.md, "Speed")."""

    kept: list = field(default_factory=list)  # (how it was compiled, model, its compile)
    compiles: int = 0

    def compiled_for(self, model: pm.Model, compile_model, how: str = "") -> object:
        """The compile for `model` (`how`: the backend): an earlier one of the same `how` given this model's data,
        else `compile_model(model)`, kept."""
        for done_how, earlier, compiled in self.kept:
            if done_how == how and same_but_data(earlier, model):  # chains start from the earlier initial points
                return compiled.with_data(**{v.name: np.asarray(v.get_value()) for v in model.data_vars})
        compiled = compile_model(model)
        self.compiles += 1
        self.kept.append((how, model, compiled))
        return compiled


def _nutpie(model: pm.Model, s: FitSettings, compiled_models: CompiledModels):
    nutpie = require("nutpie", "odi", "odi.sampler=nutpie")
    backend = resolve_backend(s.nutpie_backend)
    if backend == "jax":
        _need_jax("nutpie_backend=jax")
        prepare_xla()

    def compile_model(model: pm.Model):
        from pymc.model.transform.optimization import freeze_dims_and_data

        with no_pytensor_blas_warning():  # shapes frozen, data left free: another outcome's data can replace them
            return nutpie.compile_pymc_model(freeze_dims_and_data(model, data=[]), backend=backend, freeze_model=False,
                                             gradient_backend="jax" if backend == "jax" else "pytensor")

    compiled = compiled_models.compiled_for(model, compile_model, backend)
    start = time.perf_counter()
    idata = nutpie.sample(compiled, draws=s.draws, tune=s.tune, chains=s.chains, cores=s.n_cores, seed=s.seed,
                          progress_bar=s.progress, target_accept=s.target_accept, save_warmup=False,
                          low_rank_modified_mass_matrix=s.mass_matrix is MassMatrix.low_rank)
    return idata, time.perf_counter() - start


def _need_jax(what: str) -> None:
    """jax (and, for sampler=numpyro, numpyro) importable, or one MissingExtra naming the [odi] extra."""
    require("jax", "odi", what)
    if what == "sampler=numpyro":
        require("numpyro", "odi", what)


def _numpyro(model: pm.Model, s: FitSettings):
    _need_jax("sampler=numpyro")
    prepare_xla(devices=s.n_cores)  # one XLA CPU device per chain
    start = time.perf_counter()
    with model, no_pytensor_blas_warning():
        idata = pm.sample(draws=s.draws, tune=s.tune, chains=s.chains, random_seed=s.seed, nuts_sampler="numpyro",
                          target_accept=s.target_accept, progressbar=s.progress, compute_convergence_checks=False,
                          nuts_sampler_kwargs={"chain_method": "parallel"})
    return idata, time.perf_counter() - start


def _compiled_as(s: FitSettings):
    """PyTensor's mode for everything the fit compiles (`FitSettings.pytensor_mode`; `c` changes nothing)."""
    if s.pytensor_mode.pytensor_name is None:
        return nullcontext()
    if s.pytensor_mode is PyTensorMode.jax:
        _need_jax("odi.pytensor_mode=jax")
    import pytensor

    return pytensor.config.change_flags(mode=s.pytensor_mode.pytensor_name)


def _pymc(model: pm.Model, s: FitSettings):
    start = time.perf_counter()
    with model, _compiled_as(s):
        idata = pm.sample(draws=s.draws, tune=s.tune, chains=s.chains, cores=s.n_cores, random_seed=s.seed,
                          target_accept=s.target_accept, progressbar=s.progress, compute_convergence_checks=False)
    return idata, time.perf_counter() - start


def _advi(model: pm.Model, s: FitSettings):
    start = time.perf_counter()
    with model, _compiled_as(s):
        approx = pm.fit(n=s.advi_iterations, method="advi", random_seed=s.seed, progressbar=s.progress,
                        callbacks=[pm.callbacks.CheckParametersConvergence(tolerance=1e-3, diff="relative")])
        idata = approx.sample(s.draws, random_seed=s.seed)
    idata.attrs["advi_final_loss"] = float(approx.hist[-1]) if len(approx.hist) else float("nan")
    idata.attrs["advi_iterations"] = len(approx.hist)
    return idata, time.perf_counter() - start


def reported_vars(idata: az.InferenceData) -> list[str]:
    """The reported parameters present in this posterior."""
    return [v for v in REPORTED if v in idata["posterior"]]


def diagnostics(idata: az.InferenceData, wall_s: float, var_names: list[str] | None = None) -> pd.DataFrame:
    """One row per parameter: max R-hat, min bulk and tail ESS, plus min bulk ESS per second."""
    names = var_names or reported_vars(idata)
    n_chains = idata["posterior"].sizes["chain"]
    rhat = az.rhat(idata, var_names=names) if n_chains > 1 else None
    bulk = az.ess(idata, var_names=names, method="bulk")
    tail = az.ess(idata, var_names=names, method="tail")
    rows = [{"parameter": v, "size": int(np.prod(bulk[v].shape)) or 1,
             "rhat_max": float(rhat[v].max()) if rhat is not None else float("nan"),
             "ess_bulk_min": float(bulk[v].min()), "ess_tail_min": float(tail[v].min())} for v in names]
    table = pd.DataFrame(rows)
    table["ess_bulk_per_s"] = table["ess_bulk_min"] / max(wall_s, 1e-9)
    return table


def divergences(idata: az.InferenceData) -> int:
    """Number of divergent transitions after tuning (0 for ADVI)."""
    stats = getattr(idata, "sample_stats", None)
    if stats is None:
        return 0
    for name in ("diverging", "divergent"):
        if name in stats:
            return int(stats[name].sum())
    return 0


def summary(idata: az.InferenceData, wall_s: float, settings: FitSettings, table: pd.DataFrame | None = None) -> dict:
    """Headline diagnostics for the run folder and the benchmark, with the convergence verdict and its label;
    `table`: the posterior's `diagnostics`, where the caller has them (ArviZ computes ESS one parameter at a time)."""
    table = diagnostics(idata, wall_s) if table is None else table
    head = {"sampler": settings.sampler, "smoke": settings.smoke, "chains": int(idata["posterior"].sizes["chain"]),
            "draws": int(idata["posterior"].sizes["draw"]), "tune": settings.tune, "wall_s": round(wall_s, 2),
            "rhat_max": float(table["rhat_max"].max()), "ess_bulk_min": float(table["ess_bulk_min"].min()),
            "ess_tail_min": float(table["ess_tail_min"].min()),
            "ess_bulk_min_per_s": float(table["ess_bulk_min"].min() / max(wall_s, 1e-9)),
            "divergences": divergences(idata)}
    verdict = Convergence.of(head)
    return {**head, "converged": verdict.converged, "convergence": verdict.label}
