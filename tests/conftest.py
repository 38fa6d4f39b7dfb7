"""What every test shares: offline, one thread, the one harness for the apps (`run_module`, in this process;
facet_probe_dev/testing/in_process.py) and the tiny models (`tiny_root`, built once per test run). Markers:
`slow` (a case over about 2 s; `make test-fast` leaves them out)."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

# Bytecode for the package and for pytest's rewritten test modules, written even where PYTHONDONTWRITEBYTECODE is set
# (into the ignored __pycache__ folders): without it every xdist worker rewrites and compiles 450 test modules and
# the package again on every run, about 6 s of each worker's start.
sys.dont_write_bytecode = False

from facet_probe_dev.testing.in_process import OFFLINE_ENV  # noqa: E402 - after the bytecode switch

for _key, _value in {**OFFLINE_ENV, "OMP_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_key, _value)  # before transformers and huggingface_hub read them at import
# PyTensor records a stack trace on every graph variable it makes, for its error messages: 6-7% of the ODI tests'
# time (a few hundred thousand variables as each model compiles). The tests read no such message. Its search for a
# BLAS library (0.8 s of gcc in every process that compiles C, and a warning) finds none in a pip install: say so.
# And its default mode compiles C modules with gcc for every graph a test evaluates (`initial_point()`,
# `compile_logp()`, `.eval()`): 82 modules in tests/odi on a machine's first run, as on every CI run, each once per
# machine; FAST_COMPILE evaluates them in Python. The samplers' own modes are set by each test (JAX, FAST_COMPILE).
os.environ.setdefault("PYTENSOR_FLAGS", "traceback__limit=0,blas__ldflags=,mode=FAST_COMPILE")


def pytest_collection_finish(session: pytest.Session) -> None:
    """One torch thread in every test that collected torch (the tiny models' tests), whatever OMP_NUM_THREADS.
    Then what collection imported (torch, transformers, PyMC, JAX, the SDKs: about 900,000 objects that live as
    long as the worker) leaves the garbage collector's view: each full collection, such as the one an HF runner's
    `close()` makes to free a model, walked them all (0.47 s a call, 55 s of a suite run); garbage made after
    this point is collected as before."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules holding slow tests first (each module's tests kept together and in order), so that the xdist
    workers start the long ones early and the run does not end on one worker with one long test."""
    slow = {item.nodeid.partition("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.partition("::")[0] not in slow)


@pytest.fixture(scope="session")
def run_shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that its xdist workers share (their basetemps' parent), for what is built once
    per run whichever worker needs it first (`built_once`): with work stealing, one module's tests can run on
    both workers."""
    run = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # an xdist worker: its basetemp is <the run's basetemp>/gw<n>
        run = run.parent
    return run


@pytest.fixture(scope="session")
def tiny_root(run_shared: Path) -> Path:
    """The folder of the tiny models (`tiny_model_path(family, tiny_root)`, `train_tiny_llava(tiny_root)`), one
    per test run: its xdist workers share it, and each model is built once (`built_once`). Read only: a test
    that changes a model changes its own copy (`shutil.copytree(..., tmp_path / ...)`)."""
    root = run_shared / "tiny_models"
    root.mkdir(exist_ok=True)
    return root


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A test that leaves Hydra's runtime set (`HydraConfig`: an app run outside `run_module`'s kept state) fails:
    the next tests in its worker would run with a Hydra runtime they must not see (the audit without one)."""
    hydra_config = sys.modules.get("hydra.core.hydra_config")
    before = hydra_config is not None and hydra_config.HydraConfig.initialized()
    outcome = yield
    hydra_config = sys.modules.get("hydra.core.hydra_config")
    if not before and hydra_config is not None and hydra_config.HydraConfig.initialized():
        hydra_config.HydraConfig.instance().cfg = None
        if outcome.excinfo is None:
            pytest.fail("the test left Hydra's runtime set (HydraConfig): run apps through "
                        "facet_probe_dev.testing.in_process.run_argv / run_module, which restore it", pytrace=False)
