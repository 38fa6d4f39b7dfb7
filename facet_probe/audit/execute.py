"""The audit's run loop: every planned trial the store lacks, through the model's runner (each identical call
made once, shared calls claimed across runs), scored into a trial record and appended to the store."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from hydra.utils import instantiate
from omegaconf import DictConfig

from facet_probe.audit.manifest import ManifestRow
from facet_probe.audit.plan import Cell, ModelPlan, PlannedTrial, iter_models, plan_model, policy_hints
from facet_probe.audit.progress import AuditProgress
from facet_probe.core.trials import KEY_VERSION, SCORER_VERSION, Trial
from facet_probe.runners.base import Request, Response, Runner
from facet_probe.runners.cost.ledger import CostLedger
from facet_probe.runners.cost.paid import PaidRunner, announce_panel, paid_model, with_paid_runner
from facet_probe.scoring import score as scoring
from facet_probe.scoring.stability import STABILITY_INSTRUCTION, parse_stability
from facet_probe.store.atomic import WriteFailed
from facet_probe.store.trial_store import TrialStore


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
        trial.scorer_version = SCORER_VERSION
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
    first_call: float | None = None  # time.monotonic() of the first call and of the last answer (app.timeline)
    last_answer: float | None = None


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
                if (cached := store.cached_call(key)) is not None:
                    for plan in by_call.pop(key):
                        trial = make_trial(plan, model_name, fingerprint, cached)
                        store.append(trial)
                        progress.update(trial)
                        counts.reused += 1
            calls = {key: by_call.pop(key) for key in list(by_call) if key in mine}
            if calls and counts.first_call is None:
                counts.first_call = time.monotonic()
            replies = runner.generate(call_requests(calls)) if calls else iter(())
            try:
                for request, response in replies:
                    counts.last_answer = time.monotonic()
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


def plan_paid_models(models: list[tuple[str, Runner]], cells: list[Cell], rows: list[ManifestRow],
                     cfg: DictConfig, store: TrialStore) -> dict[str, ModelPlan]:
    """The API models' plans, made before the run's first call so that the panel's estimate (every paid model
    and the total) is shown once and `budget_usd` checked against it (`runners.cost.paid.announce_panel`); the others are
    planned in their turn (an HF model is fingerprinted once its weights are loaded)."""
    plans = {name: plan_model(runner, name, cells, rows, cfg) for name, runner in models
             if isinstance(runner, PaidRunner)}
    announce_panel([(runner, pending_requests(plans[name].planned, store, name))
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


def instantiate_models(cfg: DictConfig, model_choice: str, ledger: CostLedger) -> list[tuple[str, Runner]]:
    """Every model of the run, each pre-flighted (keys, files, extras; no weights loaded), so a panel
    never spends one model's calls before finding that a later one cannot run; an API model's calls go through
    `ledger` (the run folder's cost.json: estimate, spend, `budget_usd`)."""
    models = []
    for name, node in iter_models(cfg, model_choice):
        runner = instantiate(node, _convert_="all")
        runner.preflight()
        models.append((name, paid_model(name, runner, cfg, ledger)))  # + the batch API with batch.enabled
    return models


def instantiate_judge(cfg: DictConfig, ledger: CostLedger):
    """The run's judge (None for judge=none), its key checked before any model call; an API judge's calls go
    through the run's ledger, so `budget_usd` counts them with the models' (facet_probe/runners/cost/)."""
    if not cfg.judge or not cfg.judge.get("_target_"):
        return None
    judge = instantiate(cfg.judge, _convert_="all")
    judge.runner.check_ready()  # a missing judge key fails before any model call
    return with_paid_runner(judge, ledger)
