"""Run orchestration: config -> items -> manifest -> prompts -> runner (via the store) -> report.

One direction, no back and forth. Everything that can fail without a model call (unknown names,
unsupported facet/dataset pairs, missing data, missing keys) fails before the first call.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from facet_probe import cost, scoring
from facet_probe.atomic import WriteFailed, atomic_path
from facet_probe.calibration import STABILITY_INSTRUCTION, parse_stability, protocol_instruction
from facet_probe.config import check_run_settings
from facet_probe.config_loading import ConfigError, load_option
from facet_probe.datasets.base import DatasetLoader, check_shortfall
from facet_probe.datasets.configs import dataset_config
from facet_probe.facets.base import Facet
from facet_probe.facets.registry import facet_class
from facet_probe.items import AnswerType, Item, check_images
from facet_probe.manifest import ManifestRow, build_manifest, check_manifest_size
from facet_probe.progress import AuditProgress
from facet_probe.prompt_mitigation import instruction_of
from facet_probe.prompts import Prompt, PromptMode, with_instruction
from facet_probe.run_trials import RunScope
from facet_probe.runners.base import Request, Response, Runner
from facet_probe.store import TrialStore, parse_shard, shard_file
from facet_probe.trials import KEY_VERSION, Trial, call_key, fingerprint_hash, trial_keys_of

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


@dataclass
class PlannedTrial:
    """A manifest row made concrete for one model: its prompt and keys."""

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
    cells = []
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
    loaded: dict[str, list[Item]] = {}
    skipped: dict[str, dict[str, int]] = {}
    shortfalls: dict[str, dict] = {}
    for cell in cells:
        if cell.dataset not in loaded:
            loader: DatasetLoader = instantiate(dataset_config(cfg, cell.dataset, dataset_choice))
            if not pairs(loader, cell):
                raise ConfigError(
                    f"facet {cell.facet_name} cannot be applied to dataset {cell.dataset}: it supports "
                    f"{', '.join(loader.facets)}, and the facet's config lists "
                    f"{', '.join(cell.facet.datasets) or 'no datasets'}")
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
    items = {(c.facet_name, i.item_id): (i, c.facet, c.instruction) for c in cells for i in c.items}
    shard_i, shard_n = parse_shard(shard) if shard else (0, 1)
    occurrences = {} if share_repeated_orderings else ordering_occurrences(rows)
    rendered: dict[tuple, Prompt] = {}
    planned = []
    for row in rows:
        item, facet, instruction = items[(row.facet, row.item_id)]
        if shard_n > 1 and _shard_of(item.item_id, shard_n) != shard_i:
            continue
        key = (row.facet, row.item_id, row.permutation)
        if key not in rendered:
            rendered[key] = with_instruction(facet.render(item, row.permutation, mode), instruction)
        prompt = rendered[key]
        ck = call_key(fingerprint, prompt.hash, row.repeat_idx, occurrences.get(_row_id(row), 0))
        keys = trial_keys_of(ck, model, row.facet, row.item_id, row.ordering_idx, row.seed, row.k)
        tk, *legacy = keys
        required: dict[str, dict] = {}
        calls = []
        for old_fp, provenance in legacy_fingerprints:
            old_ck = call_key(old_fp, prompt.hash, row.repeat_idx, occurrences.get(_row_id(row), 0))
            calls.append((old_ck, provenance))
            for old in trial_keys_of(old_ck, model, row.facet, row.item_id, row.ordering_idx, row.seed, row.k):
                legacy.append(old)
                required[old] = provenance
        planned.append(PlannedTrial(row, item, facet, prompt, ck, tk, model, tuple(legacy), required, tuple(calls),
                                    instruction))
    return planned


def ordering_occurrences(rows: list[ManifestRow]) -> dict[tuple, int]:
    """Per row, how many rows of the same (facet, item, repeat) ask its ordering before it, counted in
    ordering_idx order: 0 for an ordering's first row, j for its j-th repeat (n! < K)."""
    seen: dict[tuple, int] = defaultdict(int)
    out = {}
    for row in sorted(rows, key=lambda r: (r.facet, r.dataset, r.item_id, r.repeat_idx, r.ordering_idx)):
        ordering = (row.facet, row.dataset, row.item_id, row.repeat_idx, tuple(row.permutation))
        out[_row_id(row)] = seen[ordering]
        seen[ordering] += 1
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


def make_trial(plan: PlannedTrial, model: str, fingerprint: str, response: Response | dict) -> Trial:
    """Score a response (fresh or reused from the store) into a trial record."""
    if isinstance(response, dict):  # a stored record of an identical call
        text, thinking, error = response["raw_output"], response.get("thinking"), None
        latency, usage, prov = 0.0, response.get("usage") or {}, dict(response.get("provenance") or {})
        prov["reused_from_call"] = response["call_key"]
    else:
        text, thinking, error = response.text, response.thinking, response.error
        latency, usage, prov = response.latency_s, response.usage, response.provenance
    row, item = plan.row, plan.item
    trial = Trial(
        trial_key=plan.trial_key, call_key=plan.call_key, model=model, facet=row.facet,
        dataset=row.dataset, item_id=row.item_id, ordering_idx=row.ordering_idx,
        repeat_idx=row.repeat_idx, permutation=list(row.permutation),
        component_ids=list(row.component_ids), prompt_hash=plan.prompt.hash,
        mode=str(plan.prompt.mode), instruction=plan.instruction or None, n_options=len(item.choices) or None,
        raw_output=text or "",
        thinking=thinking, error=error, model_fingerprint=fingerprint, latency_s=latency, usage=usage,
        provenance=prov, created_at=datetime.now(UTC).isoformat(timespec="seconds"), seed=row.seed, k=row.k)
    if error is None:
        s = scoring.score(item, plan.facet, row.permutation, plan.prompt, text or "")
        trial.answer_raw, trial.answer_normalized = s.answer_raw, s.answer_normalized
        trial.gold_normalized, trial.correct = s.gold_normalized, s.correct
        trial.score_kind, trial.parse_status = s.score_kind, s.parse_status
        trial.scorer_version = scoring.SCORER_VERSION
        if plan.instruction and STABILITY_INSTRUCTION in plan.instruction:
            trial.stated_stability = parse_stability(text)
    return trial


def rekeyed(plan: PlannedTrial, record: dict) -> Trial:
    """An older-scheme record of this same trial under the current keys (the answer as it was stored)."""
    trial = Trial.from_dict({**record, "trial_key": plan.trial_key, "call_key": plan.call_key,
                             "seed": plan.row.seed, "k": plan.row.k, "key_version": KEY_VERSION,
                             "migrated_from": record["trial_key"]})
    return trial


@dataclass
class RunCounts:
    planned: int = 0
    already_done: int = 0
    migrated: int = 0  # older-scheme records re-keyed (no call)
    reused: int = 0
    called: int = 0
    errors: int = 0
    seconds: float = 0.0


def close_replies(replies: Iterator) -> None:
    """Close a runner's replies now, not when garbage collected (its cleanup, the cost ledger's write, runs here,
    never as an "Exception ignored" traceback); a write failing there too is the full disk already being said."""
    with contextlib.suppress(WriteFailed):
        getattr(replies, "close", lambda: None)()


def run_model(runner: Runner, model_name: str, fingerprint: str, planned: list[PlannedTrial],
              store: TrialStore, show_progress: bool = True) -> RunCounts:
    """Complete every planned trial that the store lacks; each identical call is made once.

    `fingerprint` is the hash of `runner.fingerprint()` that the plan's keys were built with."""
    t0 = time.perf_counter()
    counts = RunCounts(planned=len(planned))
    todo = [p for p in planned if not store.done(p.trial_key)]
    counts.already_done = len(planned) - len(todo)
    by_call: dict[str, list[PlannedTrial]] = defaultdict(list)
    with AuditProgress(total=len(planned), done=counts.already_done, enabled=show_progress,
                       label=model_name) as progress:
        for plan in todo:
            found = stored_answer(plan, store, model_name)
            if found is None:
                by_call[plan.call_key].append(plan)
                continue
            kind, record = found
            if kind == "migrated":
                trial = rekeyed(plan, record)
                trial.model_fingerprint = fingerprint  # an older fingerprint's record now answers this one
                counts.migrated += 1
            else:
                trial = make_trial(plan, model_name, fingerprint, record)
                counts.reused += 1
            store.append(trial)
            progress.update(trial)
        # Runs sharing `store.cache_dir` claim each call first: one claimed by another live run is waited for
        # and taken from the shared cache once answered (or made here if that run failed it or is gone).
        mine = store.claim_calls(by_call)
        while by_call:
            for key in [k for k in by_call if k not in mine]:
                if (record := store.cached_call(key)) is not None:
                    for plan in by_call.pop(key):
                        trial = make_trial(plan, model_name, fingerprint, record)
                        store.append(trial)
                        progress.update(trial)
                        counts.reused += 1
            calls = {key: by_call.pop(key) for key in list(by_call) if key in mine}
            replies = runner.generate(call_requests(calls)) if calls else iter(())
            try:
                for request, response in replies:
                    for plan in calls[request.key]:
                        trial = make_trial(plan, model_name, fingerprint, response)
                        store.append(trial)
                        progress.update(trial)
                        counts.called += plan is calls[request.key][0]
                        counts.errors += trial.error is not None
            except BaseException:
                close_replies(replies)
                raise
            finally:
                store.release_calls(calls)
            if by_call:
                mine = store.claim_calls(store.wait_for_calls(by_call))
    counts.seconds = round(time.perf_counter() - t0, 3)
    return counts


def stored_answer(plan: PlannedTrial, store: TrialStore, model_name: str) -> tuple[str, dict] | None:
    """What the store already holds for a planned trial it lacks: ("migrated", an older-scheme record of this
    trial) or ("reused", a record of the identical call); None when the call must be made."""
    old = store.legacy_record(plan.legacy_keys, model_name)
    if old is not None and _shows(old, plan.legacy_provenance.get(old["trial_key"], {})):
        return "migrated", old
    hit = store.cached_call(plan.call_key)
    for old_call, wanted in plan.legacy_calls if hit is None else ():
        found = store.cached_call(old_call)
        if found is not None and _shows(found, wanted):
            hit = found
            break
    return None if hit is None else ("reused", hit)


def call_requests(by_call: dict[str, list[PlannedTrial]]) -> list[Request]:
    """One request per call key, for the first of the planned trials that share it."""
    return [Request(key=ck, prompt=plans[0].prompt, seed=_sample_seed(plans[0]),
                    metadata={**policy_hints(plans[0]), "cell": f"{plans[0].row.facet}/{plans[0].row.dataset}"})
            for ck, plans in by_call.items()]


def pending_requests(planned: list[PlannedTrial], store: TrialStore, model_name: str) -> list[Request]:
    """The calls `run_model` would make now: planned trials the store neither holds nor can answer."""
    by_call: dict[str, list[PlannedTrial]] = defaultdict(list)
    for plan in planned:
        if not store.done(plan.trial_key) and stored_answer(plan, store, model_name) is None:
            by_call[plan.call_key].append(plan)
    return call_requests(by_call)


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
    legacy = [(fingerprint_hash(old["fingerprint"]), old.get("provenance") or {})
              for old in getattr(runner, "legacy_fingerprints", list)()]  # re-keyed, never re-called
    mode = PromptMode.COT if cfg.prompt.cot else PromptMode.DIRECT
    planned = plan_trials(cells, rows, name, fp_hash, mode, cfg.store.shard,
                          share_repeated_orderings=cfg.share_repeated_orderings, legacy_fingerprints=legacy)
    return ModelPlan(fingerprint, fp_hash, planned)


def plan_paid_models(models: list[tuple[str, Runner]], cells: list[Cell], rows: list[ManifestRow],
                     cfg: DictConfig, store: TrialStore) -> dict[str, ModelPlan]:
    """The API models' plans, made before the run's first call so that the panel's estimate (every paid model
    and the total) is shown once and `budget_usd` checked against it (`cost.announce_panel`); the others are
    planned in their turn (an HF model is fingerprinted once its weights are loaded)."""
    plans = {name: plan_model(runner, name, cells, rows, cfg) for name, runner in models
             if isinstance(runner, cost.PaidRunner)}
    cost.announce_panel([(runner, pending_requests(plans[name].planned, store, name))
                         for name, runner in models if name in plans])
    return plans


def _shows(record: dict, wanted: dict) -> bool:
    """A stored record's provenance has every wanted value (an older fingerprint's record counts only then)."""
    return all((record.get("provenance") or {}).get(k) == v for k, v in wanted.items())


def _sample_seed(plan: PlannedTrial) -> int:
    """Per-call sampling seed (used only when decoding samples): one stream per (item, ordering, repeat), so no
    two items, orderings or repeats share a random stream, and a resumed run draws what a fresh one would."""
    row = plan.row
    text = f"{row.seed}:{row.facet}:{row.dataset}:{row.item_id}:{row.ordering_idx}:{row.repeat_idx}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") % (2**31)


def iter_models(cfg: DictConfig, model_choice: str) -> Iterator[tuple[str, DictConfig]]:
    """The run's model, or the experiment's list of models, each with the experiment's `model_settings`."""
    names: Sequence[str] = list(cfg.experiment.models) or [model_choice]
    settings = cfg.experiment.get("model_settings") or {}
    for name in names:
        node = cfg.model if name == model_choice else load_option("model", name)
        if unknown := sorted(set(settings) - set(node)):
            raise ConfigError(f"experiment.model_settings sets {', '.join(unknown)}, which model {name}'s config "
                              f"does not have (it has: {', '.join(k for k in node if k != '_target_')}); set it "
                              "per model instead, or leave that model out of experiment.models")
        yield name, (OmegaConf.merge(node, settings) if settings else node)


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


def instantiate_models(cfg: DictConfig, model_choice: str,
                       ledger: cost.CostLedger | None = None) -> list[tuple[str, Runner]]:
    """Every model of the run, each pre-flighted (keys, files, extras; no weights loaded), so a panel
    never spends one model's calls before finding that a later one cannot run."""
    models = []
    ledger = ledger or cost.run_ledger(cfg)  # cost.json: API models' estimate, spend, `budget_usd` (cost.py)
    for name, node in iter_models(cfg, model_choice):
        runner = instantiate(node, _convert_="all")
        runner.preflight()
        models.append((name, cost.paid_model(name, runner, cfg, ledger)))  # + the batch API with batch.enabled
    return models


def instantiate_judge(cfg: DictConfig, ledger: cost.CostLedger):
    """The run's judge (None for judge=none), its key checked before any model call; an API judge's calls go
    through the run's ledger, so `budget_usd` counts them with the models' (facet_probe/cost.py)."""
    if not cfg.judge or not cfg.judge.get("_target_"):
        return None
    judge = instantiate(cfg.judge, _convert_="all")
    judge.runner.check_ready()  # a missing judge key fails before any model call
    return cost.with_paid_runner(judge, ledger)


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


def report_dir(run_dir: Path, shard: str | None) -> Path:
    """Where this process's report goes: the run folder, or `shards/<i>-of-<n>/` for one shard of it (a
    shard's numbers never stand in the folder's summary as if they were the whole run's)."""
    if not shard or parse_shard(shard)[1] == 1:
        return run_dir
    i, n = parse_shard(shard)
    return run_dir / "shards" / f"{i}-of-{n}"


def trials_path(run_dir: Path, cfg: DictConfig) -> Path:
    return shard_file(run_dir, cfg.store.shard)
