"""Typed schema of the audit app's config (registered with Hydra's ConfigStore).

Top-level keys are typed, so a misspelt override (`kk=3`) fails at composition with Hydra's
"Key 'kk' not in 'AuditConfig'". Group nodes (`model`, `facet`, `dataset`, `judge`) are
`_target_` configs validated by the class they instantiate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


@dataclass
class PromptConfig:
    cot: bool = False  # chain-of-thought mode: a rationale, then "The answer is (X)."


@dataclass
class CellConfig:
    facet: str = MISSING
    datasets: list[str] = field(default_factory=list)


@dataclass
class ExperimentConfig:
    """A panel: several facets x datasets (cells) x models in one command."""

    name: str = "custom"
    models: list[str] = field(default_factory=list)  # empty: the run's `model`
    cells: list[CellConfig] = field(default_factory=list)


@dataclass
class StoreConfig:
    cache_dir: str | None = None  # a call cache shared across runs (identical calls are reused)
    shard: str | None = None  # "i/n": this process runs shard i of n, writing its own trials file


@dataclass
class AuditConfig:
    model: Any = MISSING
    facet: Any = None
    dataset: Any = None
    judge: Any = None
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    k: int = 6  # orderings per (item, facet)
    seed: int = 42  # manifest seed (FACET-PROBE compatible)
    limit: int | None = None  # first N items of each dataset's sample
    repeats: int = 1  # same-order control: each ordering asked R times
    prompt: PromptConfig = field(default_factory=PromptConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    prepare_only: bool = False  # write items and manifest, then stop
    data_root: str | None = None  # default parent folder of local dataset copies (<data_root>/<name>)
    out_root: str = "outputs"
    run_name: str = ("${fp_run_name:${model.name},${oc.select:facet._target_,null},"
                     "${oc.select:dataset.name,null},${experiment.name},${prompt.cot},${k},${seed},${repeats}}")
    bootstrap: int = 1000  # item-bootstrap resamples for confidence intervals
    progress: bool = True


def run_name(model: str, facet_target: str | None, dataset: str | None, experiment: str, cot: bool,
             k: int, seed: int, repeats: int) -> str:
    """Readable, deterministic run folder name: re-running the same command resumes in place."""
    scope = experiment
    if facet_target:
        scope = facet_target.rsplit(".", 1)[0].rsplit(".", 1)[-1]  # module name = facet name
        if dataset:
            scope += f"-{dataset}"
    elif dataset:
        scope += f"-{dataset}"
    mode = "cot" if cot else "direct"
    suffix = f"{mode}-k{k}-seed{seed}" + (f"-r{repeats}" if int(repeats) > 1 else "")
    return f"{model}/{scope}/{suffix}"


def asset_path(name: str) -> str:
    """Filesystem path of a package asset (e.g. the embedded tiny VLM), wherever facet_probe is installed."""
    from importlib.resources import files

    return str(files("facet_probe.assets").joinpath(name))


def register() -> None:
    """Register the schema and resolvers (idempotent)."""
    if not OmegaConf.has_resolver("fp_run_name"):
        OmegaConf.register_new_resolver("fp_run_name", run_name)
    if not OmegaConf.has_resolver("fp_asset"):
        OmegaConf.register_new_resolver("fp_asset", asset_path)
    ConfigStore.instance().store(name="facet_probe_schema", node=AuditConfig)
