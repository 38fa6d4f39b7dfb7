"""The audit's plan: config -> cells (facet x dataset) -> their items -> the manifest of K orderings -> one
planned trial per (model, manifest row), keyed so that a resumed run finds what it has. Everything that can
fail without a model call (unknown names, unsupported pairs, missing data or keys) fails here, before the first.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from facet_probe.audit.manifest import ManifestRow, build_manifest, check_manifest_size
from facet_probe.audit.mitigation import instruction_of
from facet_probe.config.loading import ConfigError, load_option, prefetch
from facet_probe.config.schema import check_run_settings
from facet_probe.core.items import AnswerType, Item, check_images
from facet_probe.core.prompts import Prompt, PromptMode, with_instruction
from facet_probe.core.trials import call_key, fingerprint_hash, trial_keys_of
from facet_probe.datasets.base import DatasetLoader, check_shortfall
from facet_probe.datasets.configs import dataset_config
from facet_probe.facets.base import Facet
from facet_probe.facets.registry import facet_class
from facet_probe.runners.base import Runner, check_runner_target, declared
from facet_probe.scoring.run_trials import RunScope
from facet_probe.scoring.stability import protocol_instruction
from facet_probe.store.atomic import atomic_path
from facet_probe.store.run_folder import parse_shard

log = logging.getLogger(__name__)


@dataclass
class Cell:
    """One facet applied to one dataset's items."""

    facet_name: str
    facet: Facet
    dataset: str
    items: list[Item] = field(default_factory=list)
    skipped_rows: dict[str, int] = field(default_factory=dict)  # rows the loader could not make into items
    instruction: str = ""  # the prompt mitigation's text added to every system text (`prompt.mitigation`)
    # the prompts rendered so far, shared by every model planned over the cell (`cell_prompt`)
    prompts: dict[tuple, tuple] = field(default_factory=dict, repr=False, compare=False)


def cell_prompt(cell: Cell, item: Item, permutation: tuple[int, ...], mode: PromptMode) -> Prompt:
    """The prompt of one ordering of a cell's item: rendered once per (item, ordering, mode) and shared by every
    model planned over the cell (a prompt depends on no model setting), re-rendered if the cell's item, facet or
    instruction was replaced since."""
    key = (item.item_id, permutation, mode)
    hit = cell.prompts.get(key)
    if hit is not None and hit[0] is item and hit[1] is cell.facet and hit[2] == cell.instruction:
        return hit[3]
    prompt = with_instruction(cell.facet.render(item, permutation, mode), cell.instruction)
    cell.prompts[key] = (item, cell.facet, cell.instruction, prompt)
    return prompt


@dataclass(slots=True)
class PlannedTrial:
    """A manifest row made concrete for one model: its prompt and keys (slotted: a panel plans millions)."""

    row: ManifestRow
    item: Item
    facet: Facet
    prompt: Prompt
    call_key: str
    trial_key: str
    trial_model: str = ""  # the configured model name the keys were made for
    legacy_keys: tuple[str, ...] = ()  # the keys older stores hold for this same trial (re-keyed, not re-called)
    # per legacy key of an older fingerprint, the provenance its record must show (e.g. the attention used)
    legacy_provenance: dict[str, dict] = field(default_factory=dict)
    # the call keys of older fingerprints, each with that provenance: a shared cache's record answers this call
    legacy_calls: tuple[tuple[str, dict], ...] = ()
    instruction: str = ""  # the cell's prompt mitigation text, recorded with the trial


# ---------------------------------------------------------------- cells and items

def prefetch_options(cfg: DictConfig, facet_choice: str | None, dataset_choice: str | None,
                     model_choice: str | None) -> None:
    """Compose at once every facet, dataset and model config the run looks up by name (its panel's: the chosen
    ones are in `cfg`), so a panel costs one Hydra compose, not one per config (`config.loading.prefetch`)."""
    specs = [] if facet_choice else list(cfg.experiment.cells)
    datasets = {str(d) for spec in specs for d in spec.datasets} - {dataset_choice}
    prefetch({"facet": sorted({str(spec.facet) for spec in specs}), "dataset": sorted(datasets),
              "model": sorted({str(m) for m in cfg.experiment.models} - {model_choice})})


def resolve_cells(cfg: DictConfig, facet_choice: str | None, dataset_choice: str | None) -> list[Cell]:
    """The (facet, dataset) cells of this run: a chosen facet (narrowed by `dataset=`) or the experiment."""
    check_run_settings(cfg)  # k, limit, repeats, bootstrap, shard: refused before any work
    instruction = "\n\n".join(filter(None, (  # an unknown mitigation name: before any work
        instruction_of(OmegaConf.select(cfg, "prompt.mitigation")),
        protocol_instruction(bool(OmegaConf.select(cfg, "prompt.calibration"))))))
    if facet_choice:
        facet = _instantiate_facet(facet_choice, cfg.facet)
        datasets = [dataset_choice] if dataset_choice else list(facet.datasets)
        if not datasets:
            raise ConfigError(f"facet {facet_choice} names no datasets; pass dataset=<name>")
        return [Cell(facet_choice, facet, d, instruction=instruction) for d in datasets]
    cells: list[Cell] = []
    for spec in cfg.experiment.cells:
        datasets = list(spec.datasets)
        if dataset_choice:
            datasets = [d for d in datasets if d == dataset_choice]
        if datasets:
            facet = _instantiate_facet(spec.facet, load_option("facet", spec.facet))
            cells.extend(Cell(spec.facet, facet, d, instruction=instruction) for d in datasets)
    if not cells:
        raise ConfigError(f"experiment {cfg.experiment.name} has no cell for dataset={dataset_choice}; "
                          "choose a facet too (facet=<name>)")
    return cells


def _instantiate_facet(name: str, node: DictConfig) -> Facet:
    facet_class(node.get("_target_"), f"facet config {name}")  # a plug-in's module off the path: one line
    facet = instantiate(node)
    if facet.name != name:
        raise ConfigError(f"facet config {name} instantiates {type(facet).__name__} named {facet.name!r}")
    return facet


def pairs(loader: DatasetLoader, cell: Cell) -> bool:
    """May the cell's facet order the loader's items? Either side may declare the pair: the dataset lists the
    facet (or "*"), or the facet's config lists the dataset (so a plug-in facet needs no dataset edited)."""
    return cell.facet_name in loader.facets or "*" in loader.facets or cell.dataset in cell.facet.datasets


def load_cell_items(cells: list[Cell], cfg: DictConfig, dataset_choice: str | None) -> dict[str, dict]:
    """Load each dataset once and check that its facet can order every item (before any call); return the
    datasets that gave fewer items than asked (allowed by `dataset.allow_partial`), {name: {asked, found}}."""
    loaders: dict[str, DatasetLoader] = {}
    loaded: dict[str, list[Item]] = {}
    skipped: dict[str, dict[str, int]] = {}
    shortfalls: dict[str, dict] = {}
    for cell in cells:
        if cell.dataset not in loaders:
            loaders[cell.dataset] = instantiate(dataset_config(cfg, cell.dataset, dataset_choice))
        loader = loaders[cell.dataset]
        if not pairs(loader, cell):
            raise ConfigError(
                f"facet {cell.facet_name} cannot be applied to dataset {cell.dataset}: it supports "
                f"{', '.join(loader.facets)}, and the facet's config lists "
                f"{', '.join(cell.facet.datasets) or 'no datasets'}")
        if problem := loader.facet_problem(cell.facet_name, cell.facet.kinds):  # e.g. a column mapping with nothing the facet orders
            raise ConfigError(f"dataset {cell.dataset}: {problem}")
        if cell.dataset not in loaded:
            loaded[cell.dataset] = loader.load(limit=cfg.limit)
            skipped[cell.dataset] = loader.skipped
            if short := check_shortfall(loader, loaded[cell.dataset], cfg.limit):
                shortfalls[cell.dataset] = short
            check_images(loaded[cell.dataset])  # a missing or corrupt image fails here, not per call
        cell.items, cell.skipped_rows = loaded[cell.dataset], skipped[cell.dataset]
        for item in cell.items:
            reason = cell.facet.unsupported_reason(item)
            if reason:
                raise ConfigError(f"dataset {cell.dataset}: {reason}")
    return shortfalls


def write_items(cells: list[Cell], path: Path) -> None:
    """The canonical items of the run, one JSON per line (images inline as base64), once per (dataset, id): two
    datasets may share ids (the reference's hotpotqa and hotpotqa_docs views of one question)."""
    seen: set[tuple[str, str]] = set()
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for cell in cells:
            for item in cell.items:
                if (item.dataset, item.item_id) not in seen:
                    seen.add((item.dataset, item.item_id))
                    fh.write(item.model_dump_json() + "\n")


def build_run_manifest(cells: list[Cell], cfg: DictConfig) -> list[ManifestRow]:
    """Every cell's K orderings x repeats per item, once K is known to fit the items (`check_manifest_size`)."""
    check_manifest_size([(f"{c.facet_name}/{c.dataset}", c.facet, c.items) for c in cells], cfg.k, cfg.repeats)
    rows: list[ManifestRow] = []
    for cell in cells:
        rows.extend(build_manifest(cell.items, cell.facet, k=cfg.k, seed=cfg.seed, repeats=cfg.repeats))
    return rows


# ---------------------------------------------------------------- planning and running

def plan_trials(cells: list[Cell], rows: list[ManifestRow], model: str, fingerprint: str, mode: PromptMode,
                shard: str | None = None, share_repeated_orderings: bool = False,
                legacy_fingerprints: Sequence[tuple[str, dict]] = ()) -> list[PlannedTrial]:
    """Render every manifest row (of this shard) into a prompt with its call and trial keys for `model`.

    `legacy_fingerprints` are (hash, provenance required) of older fingerprints of the same settings
    (`runner.legacy_fingerprints()`): their keys are legacy keys too, re-keyed on resume, never re-called.

    A repeated ordering (n! < K) is a call of its own unless `share_repeated_orderings` (then the rows of
    one ordering share its first call: for greedy decoding, where re-asking returns the same answer)."""
    items = {(c.facet_name, i.item_id): (i, c) for c in cells for i in c.items}
    mode = PromptMode(mode)
    shard_i, shard_n = parse_shard(shard) if shard else (0, 1)
    occurrences = {} if share_repeated_orderings else ordering_occurrences(rows)
    planned = []
    for row in rows:
        item, cell = items[(row.facet, row.item_id)]
        if shard_n > 1 and _shard_of(item.item_id, shard_n) != shard_i:
            continue
        prompt = cell_prompt(cell, item, row.permutation, mode)
        occurrence = occurrences.get(_row_id(row), 0) if occurrences else 0
        ck = call_key(fingerprint, prompt.hash, row.repeat_idx, occurrence)
        tk, *legacy = trial_keys_of(ck, model, row.facet, row.item_id, row.ordering_idx, row.seed, row.k)
        required: dict[str, dict] = {}
        calls = []
        for old_fp, provenance in legacy_fingerprints:
            old_ck = call_key(old_fp, prompt.hash, row.repeat_idx, occurrence)
            calls.append((old_ck, provenance))
            for old in trial_keys_of(old_ck, model, row.facet, row.item_id, row.ordering_idx, row.seed, row.k):
                legacy.append(old)
                required[old] = provenance
        planned.append(PlannedTrial(row, item, cell.facet, prompt, ck, tk, model, tuple(legacy), required,
                                    tuple(calls), cell.instruction))
    return planned


def ordering_occurrences(rows: list[ManifestRow]) -> dict[tuple, int]:
    """Per row that repeats an ordering (n! < K), how many rows of the same (facet, item, repeat) ask that
    ordering before it, counted in ordering_idx order (j for its j-th repeat); a row absent asks its ordering
    first (0), as almost every row does, so the common case costs one pass and no sort."""
    rows_of: dict[tuple, list[ManifestRow]] = defaultdict(list)
    for row in rows:
        rows_of[(row.facet, row.dataset, row.item_id, row.repeat_idx, tuple(row.permutation))].append(row)
    out = {}
    for same in rows_of.values():
        if len(same) > 1:
            for j, row in enumerate(sorted(same, key=lambda r: r.ordering_idx)):  # ties keep their row order
                out[_row_id(row)] = j
    return out


def _row_id(row: ManifestRow) -> tuple:
    return row.facet, row.dataset, row.item_id, row.ordering_idx, row.repeat_idx


def _shard_of(item_id: str, n: int) -> int:
    """Shards split by item, so an item's K orderings stay together."""
    return int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % n


def policy_hints(plan: PlannedTrial) -> dict:
    """The gold and 'first option' as displayed; only reference policies (simulators) read these."""
    item, facet, perm, prompt = plan.item, plan.facet, plan.row.permutation, plan.prompt
    if item.answer_type == AnswerType.MCQ:
        slot = facet.choice_order(item, perm).index(item.gold_index)
        return {"gold": prompt.labels[slot], "first": prompt.labels[0]}
    shown = [facet.orderables(item)[i] for i in perm]
    if item.answer_type == AnswerType.TOOL:
        answers = [c.title or item.gold for c in shown]
    else:
        answers = [str(c.metadata.get("answer", item.gold)) for c in shown]
    candidates = list(dict.fromkeys([*answers, item.gold]))
    return {"gold": item.gold, "first": answers[0], "candidates": candidates}


@dataclass
class ModelPlan:
    """One model's planned trials, with the fingerprint (and its hash) their keys were made with."""

    fingerprint: dict
    fp_hash: str
    planned: list[PlannedTrial]


def plan_model(runner: Runner, name: str, cells: list[Cell], rows: list[ManifestRow], cfg: DictConfig) -> ModelPlan:
    """Ready the model (an HF model loads its weights here), fingerprint it and plan its trials."""
    runner.check_ready()
    fingerprint = runner.fingerprint()
    fp_hash = fingerprint_hash(fingerprint)
    rekeying = declared(runner).rekeying
    legacy = [(fingerprint_hash(old["fingerprint"]), old.get("provenance") or {})
              for old in (rekeying.legacy_fingerprints() if rekeying else [])]  # re-keyed, never re-called
    mode = PromptMode.of(cfg.prompt.cot)
    planned = plan_trials(cells, rows, name, fp_hash, mode, cfg.store.shard,
                          share_repeated_orderings=cfg.share_repeated_orderings, legacy_fingerprints=legacy)
    return ModelPlan(fingerprint, fp_hash, planned)


def iter_models(cfg: DictConfig, model_choice: str) -> Iterator[tuple[str, DictConfig]]:
    """The run's model, or the experiment's list of models, each with the experiment's `model_settings`."""
    names: Sequence[str] = list(cfg.experiment.models) or [model_choice]
    settings = cfg.experiment.get("model_settings") or {}
    for name in names:
        node = cfg.model if name == model_choice else load_option("model", name)
        if unknown := sorted(set(settings) - set(node)):
            raise ConfigError(f"experiment.model_settings sets {', '.join(unknown)}, which model {name}'s config "
                              f"does not have (it has: {', '.join(str(k) for k in node if k != '_target_')}); set it "
                              "per model instead, or leave that model out of experiment.models")
        check_runner_target(node, f"model {name}")
        yield name, (cast(DictConfig, OmegaConf.merge(node, settings)) if settings else node)


def check_model_overrides(cfg: DictConfig, model_choice: str, task_overrides: Sequence[str]) -> None:
    """Refuse `model.*` overrides in a panel whose `experiment.models` leaves out the run's `model` (they would
    change nothing, silently); `experiment.model_settings.*` reaches every model of the panel."""
    models = list(cfg.experiment.models)
    touched = [o for o in task_overrides if str(o).lstrip("+~").startswith("model.")]
    if models and touched and model_choice not in models:
        keys = ", ".join(str(o).lstrip("+~").partition("=")[0] for o in touched)
        raise ConfigError(f"{keys} would change model {model_choice}, which experiment.models "
                          f"[{', '.join(models)}] does not run; use experiment.model_settings.<key>=<value> "
                          "(e.g. experiment.model_settings.generation.temperature=0.7) to set it for every model")


def run_scope(planned: list[PlannedTrial], fingerprints: dict[str, str], rows: list[ManifestRow],
              shard: str | None, shortfalls: dict[str, dict] | None = None) -> RunScope:
    """What this process was asked: its planned trials (one shard's, or all), per model."""
    expected = pd.DataFrame(
        [(p.trial_model, p.row.facet, p.row.dataset, p.row.item_id, p.row.ordering_idx, p.row.repeat_idx,
          p.row.seed, p.row.k) for p in planned],
        columns=["model", "facet", "dataset", "item_id", "ordering_idx", "repeat_idx", "seed", "k"])
    run_items = len({(r.facet, r.item_id) for r in rows})
    return RunScope(expected, fingerprints, shard=shard if shard and parse_shard(shard)[1] > 1 else None,
                    run_items=run_items, trial_keys=frozenset(p.trial_key for p in planned),
                    shortfalls=shortfalls or {})

