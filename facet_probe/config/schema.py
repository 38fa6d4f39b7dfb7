"""Typed schema of the audit app's config (registered with Hydra's ConfigStore).

Top-level keys are typed, so a misspelt override (`kk=3`) fails at composition with Hydra's
"Key 'kk' not in 'AuditConfig'". Group nodes (`model`, `facet`, `dataset`, `judge`) are
`_target_` configs validated by the class they instantiate.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from facet_probe.core.prompts import PromptMode
from facet_probe.core.redact import redact_text
from facet_probe.store.durability import Durability

#: Field metadata saying how a setting shapes the run folder. NAMED: spelt out in the folder name;
#: INERT: changes no call and no item (where to write, how to show, how many bootstrap draws). Every
#: other setting changes the calls or the sample, so an override of it names a folder of its own.
NAMED = {"folder": "named"}
INERT = {"folder": "inert"}


@dataclass
class PromptConfig:
    cot: bool = field(default=False, metadata=NAMED)  # chain-of-thought mode: a rationale, then "The answer is (X)."
    # conf/prompt_mitigation/<name>.yaml: an instruction appended to the system text (it changes the calls, so it
    # names the folder through the settings suffix and is in the run identity)
    mitigation: str | None = None
    # our order-stability protocol (facet_probe/scoring/stability.py): after its answer the model states the probability
    # that the answer would survive a reordering; it changes the calls (a system-text instruction)
    calibration: bool = False


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
    # merged into every model of the experiment, the run's `model` included (`{generation: {temperature: 0.7}}`):
    # `model.*` keys reach only the run's `model`, which a panel's `models` list may not even hold
    model_settings: dict[str, Any] = field(default_factory=dict)
    # merged into every dataset of the experiment's cells (`{sampling: reference}`); `dataset.*` reaches only
    # the run's `dataset=`
    dataset_settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoreConfig:
    cache_dir: str | None = None  # a call cache shared across runs (identical calls are reused)
    shard: str | None = None  # "i/n": this process runs shard i of n, writing its own trials file
    wait_for_lock: bool = False  # another process writes this trials file: wait for it instead of exiting
    # when a trial is fsync'd: per_trial, group (every group_trials trials or group_ms ms; a kill loses at most
    # that tail, which the next run completes), or auto: per_trial for API runners (a lost call is paid again),
    # group for local models and reference policies (docs/architecture.md, "The trial store")
    durability: Durability = Durability.auto
    group_trials: int = 256
    group_ms: int = 1000


@dataclass
class BatchConfig:
    """API models through their provider's batch API (about half price, answers within 24 hours)."""

    enabled: bool = False  # batch.enabled=true: submit the planned calls as batches instead of one request each
    poll_s: float = 30.0  # seconds between status checks of the open batches
    max_requests: int = 10000  # calls per submitted batch
    max_rounds: int = 3  # a failed request is submitted again in a new batch up to this many rounds
    wait: bool = True  # false: submit (or check) the batches and stop; re-run the same command to collect


@dataclass
class AuditConfig:
    model: Any = field(default=MISSING, metadata=NAMED)
    facet: Any = field(default=None, metadata=NAMED)
    dataset: Any = field(default=None, metadata=NAMED)
    judge: Any = field(default=None, metadata=INERT)  # judgments are keyed on their own
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig, metadata=NAMED)
    k: int = field(default=6, metadata=NAMED)  # orderings per (item, facet)
    seed: int = field(default=42, metadata=NAMED)  # manifest seed (FACET-PROBE compatible)
    limit: int | None = None  # first N items of each dataset's sample
    repeats: int = field(default=1, metadata=NAMED)  # same-order control: each ordering asked R times
    # n! < K: the rows of a repeated ordering share its first call (greedy decoding) instead of each being
    # asked (the paper's six calls, the default). It changes the calls, so it is recorded and names the folder.
    share_repeated_orderings: bool = False
    prompt: PromptConfig = field(default_factory=PromptConfig)
    store: StoreConfig = field(default_factory=StoreConfig, metadata=INERT)
    prepare_only: bool = field(default=False, metadata=INERT)  # write items and manifest, then stop
    # default parent folder of local dataset copies (<data_root>/<name>)
    data_root: str | None = field(default=None, metadata=INERT)
    out_root: str = field(default="outputs", metadata=INERT)
    run_name: str = field(default=(
        "${fp_run_name:${model.name},${oc.select:facet._target_,null},"
        "${oc.select:dataset.name,null},${experiment.name},${prompt.cot},${k},${seed},${repeats}}"),
        metadata=INERT)
    bootstrap: int = field(default=1000, metadata=INERT)  # item-bootstrap resamples for confidence intervals
    # the intervals' bootstrap seed, a name of its own beside the manifest's `seed`: metrics.INTERVAL_SEED, as the
    # report's and the paper's, so a cell's interval is one number in every table (not the manifest seed)
    bootstrap_seed: int = field(default=0, metadata=INERT)
    progress: bool = field(default=True, metadata=INERT)
    # stop paid calls before the run folder's spend would exceed this many USD (cost.json; None: no limit);
    # how the calls are made (batch) or capped changes no call, so neither names the folder
    budget_usd: float | None = field(default=None, metadata=INERT)
    batch: BatchConfig = field(default_factory=BatchConfig, metadata=INERT)


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
    suffix = f"{PromptMode.of(cot).value}-k{k}-seed{seed}" + (f"-r{repeats}" if int(repeats) > 1 else "")
    return f"{model}/{scope}/{suffix}"


#: The typed sections of the audit config, whose own fields may carry NAMED / INERT marks.
_SECTIONS = {"prompt": PromptConfig, "store": StoreConfig, "experiment": ExperimentConfig}


def audit_keys(mark: dict) -> set[str]:
    """Dotted audit-config keys carrying `mark` (a marked section covers every key under it)."""
    keys = set()
    for f in fields(AuditConfig):
        if f.metadata.get("folder") == mark["folder"]:
            keys.add(f.name)
        elif f.name in _SECTIONS:
            keys |= {f"{f.name}.{g.name}" for g in fields(_SECTIONS[f.name])
                     if g.metadata.get("folder") == mark["folder"]}
    return keys


#: Config groups that change no call and no sample (`callbacks=mlflow|wandb`: Hydra callbacks that log a finished
#: run), so choosing one never moves a run to another folder.
NOT_SETTINGS = ("callbacks",)


def settings_suffix(overrides) -> str:
    """'' or '_<overrides>' for the command-line overrides of settings that change the calls or the sample
    but are not spelt out in the folder name (`limit=10`, `model.generation.temperature=0.7`, ...), so runs
    of other settings never share a folder (a sweep's grid points included); long ones become a hash."""
    named, inert = audit_keys(NAMED), audit_keys(INERT)
    kept = []
    for raw in overrides or ():
        key, _, value = str(raw).lstrip("+~").partition("=")
        if key in named or key in NOT_SETTINGS or any(key == s or key.startswith(s + ".") for s in inert):
            continue
        kept.append(f"{key}={redact_text(value)}")  # a password in a URL never names a folder
    if not kept:
        return ""
    text = ",".join(sorted(kept))
    if len(text) > 60:
        return "_settings-" + hashlib.sha256(text.encode()).hexdigest()[:10]
    return "_" + re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)


#: Seeds are stored as 64-bit integers (the manifest's Parquet, numpy's generators take no negative seed).
SEED_RANGE = range(0, 2**63)
#: The most rows one run folder's manifest holds (each a call per model): 1,000,000 take about 20 s to draw and
#: save; the paper's panel needs about 100,000. Checked before any row is drawn (`check_manifest_size`).
MAX_MANIFEST_ROWS = 1_000_000


def seed_problems(cfg, defaults: dict[str, int]) -> list[str]:
    """One `key=value: need 0 <= key < 2**63 ...` per seed key (dotted, e.g. `odi.seed`) of `cfg` outside
    SEED_RANGE, naming its default: every app that takes a seed refuses the same values with the same words."""
    return [f"{key}={value}: need 0 <= {key} < 2**63 (a seed is stored as a 64-bit integer), e.g. {key}={default} "
            "(the default)" for key, default in defaults.items()
            if not is_seed(value := OmegaConf.select(cfg, key))]


def is_seed(value) -> bool:
    """A whole number in SEED_RANGE (not a bool, a float or a string, which an untyped app config may hold)."""
    return isinstance(value, int) and not isinstance(value, bool) and value in SEED_RANGE


#: What each count setting counts: a whole number >= 1 in every app that reads it.
COUNTS = {"k": "orderings per item", "repeats": "asks of each ordering",
          "bootstrap": "item-bootstrap resamples of every interval",
          "odi.bootstrap": "resamples of the models for the capability-vs-flip Spearman interval"}


def count_problems(cfg, defaults: dict[str, int]) -> list[str]:
    """One `key=value: need a whole number key >= 1 ...` per count key (`COUNTS`) of `cfg` that is not one, naming its
    default: an untyped app config holds `bootstrap=nan` or `bootstrap=2.5` as given, which failed deep in numpy."""
    return [f"{key}={value}: need a whole number {key} >= 1 ({COUNTS[key]}), e.g. {key}={default} (the default)"
            for key, default in defaults.items() if not is_count(value := OmegaConf.select(cfg, key))]


def is_count(value) -> bool:
    """A whole number >= 1 (not a bool, a float or a string)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_counts(cfg, defaults: dict[str, int]) -> None:
    """Refuse an app's counts that are not whole numbers >= 1 (`bootstrap=0`, `bootstrap=nan`) before any work."""
    from facet_probe.core.errors import ConfigError  # it imports this module

    if problems := count_problems(cfg, defaults):
        raise ConfigError("; ".join(problems))


def check_seeds(cfg, defaults: dict[str, int]) -> None:
    """Refuse an app's seeds outside SEED_RANGE (`seed=-1`, `seed=2**64+1`) before any work, in one line."""
    from facet_probe.core.errors import ConfigError  # it imports this module

    if problems := seed_problems(cfg, defaults):
        raise ConfigError("; ".join(problems))


def check_run_settings(cfg) -> None:
    """Refuse values no audit can use (`k=0`, `k=10**12`, `seed=-1`, `limit=-1`, `repeats=0`, `bootstrap=-5`,
    `store.shard=3/2`) before any work, each with the value to give instead."""
    from facet_probe.core.errors import ConfigError  # it imports this module
    from facet_probe.store.run_folder import parse_shard

    problems = count_problems(cfg, {key: getattr(AuditConfig, key) for key in COUNTS if hasattr(AuditConfig, key)})
    problems += seed_problems(cfg, {key: getattr(AuditConfig, key) for key in ("seed", "bootstrap_seed")})
    if (per_item := cfg.k * max(cfg.repeats, 1)) > MAX_MANIFEST_ROWS:
        problems.append(f"k={cfg.k:,} x repeats={cfg.repeats:,} = {per_item:,} manifest rows per item: a run folder's "
                        f"manifest holds at most {MAX_MANIFEST_ROWS:,} (K x repeats x items); lower k or repeats (an "
                        "item of n components has n! distinct orderings)")
    if cfg.limit is not None and cfg.limit < 1:
        problems.append(f"limit={cfg.limit}: need limit >= 1 (the first N items of each dataset) or limit=null "
                        "(all of them)")
    if cfg.store.shard is not None:
        try:
            parse_shard(cfg.store.shard)
        except ValueError as exc:
            problems.append(f"{exc} (shard i of n, counted from 0: store.shard=0/2 and store.shard=1/2)")
    if cfg.store.group_trials < 1 or cfg.store.group_ms < 0:
        problems.append(f"store.group_trials={cfg.store.group_trials}, store.group_ms={cfg.store.group_ms}: need "
                        "group_trials >= 1 and group_ms >= 0 (fsync every N trials or T ms)")
    if problems:
        raise ConfigError("; ".join(problems))


def asset_path(name: str) -> str:
    """Filesystem path of a package asset (e.g. the embedded tiny VLM), wherever facet_probe is installed."""
    from importlib.resources import files

    return str(files("facet_probe.assets").joinpath(name))


def first_path(value) -> str:
    """The first of a list of paths, or the one path: a folder for Hydra's files where `input` may be a list."""
    from omegaconf import ListConfig

    return str(value[0]) if isinstance(value, (list, tuple, ListConfig)) and len(value) else str(value)


def register() -> None:
    """Register the schema and resolvers (idempotent)."""
    if not OmegaConf.has_resolver("fp_run_name"):
        OmegaConf.register_new_resolver("fp_run_name", run_name)
    if not OmegaConf.has_resolver("fp_settings_suffix"):
        OmegaConf.register_new_resolver("fp_settings_suffix", settings_suffix)
    if not OmegaConf.has_resolver("fp_first_path"):
        OmegaConf.register_new_resolver("fp_first_path", first_path)
    if not OmegaConf.has_resolver("fp_asset"):
        OmegaConf.register_new_resolver("fp_asset", asset_path)
    store = ConfigStore.instance()
    if "facet_probe_schema.yaml" not in store.repo:  # storing converts the dataclass anew: 20 ms a call
        store.store(name="facet_probe_schema", node=AuditConfig)
