"""The audit job: a composed config -> its run folder (items, manifest, trials, report). `run_audit(cfg, out_dir)`
needs no Hydra runtime: `python -m facet_probe` (the Hydra shell in `facet_probe/__main__.py`) passes Hydra's output
folder and what its command line chose, `facet_probe.run_audit` (the Python API) the composed config's; its
imports (the runners' base, pandas, the report) load only once a run starts, never for `--help`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hydra.conf import HydraConf
from omegaconf import DictConfig, OmegaConf

from facet_probe.app.boundary import RunIncomplete
from facet_probe.app.job import task_config
from facet_probe.app.timeline import Timeline
from facet_probe.audit import execute
from facet_probe.audit import plan as audit
from facet_probe.audit.manifest import manifest_frame, save_manifest
from facet_probe.config import run_identity
from facet_probe.config.loading import searching
from facet_probe.core.errors import ConfigError
from facet_probe.core.prompts import PromptMode
from facet_probe.core.redact import redact_config
from facet_probe.datasets.base import skipped_line
from facet_probe.judge import judge_run_folder
from facet_probe.report.contents import MetricRules
from facet_probe.report.figure_process import FigureDrawer
from facet_probe.report.run import finish_run
from facet_probe.runners.base import Runner, declared
from facet_probe.runners.cost.ledger import budget_setting, run_ledger
from facet_probe.runners.cost.paid import PaidRunner
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.run_folder import RunFolder
from facet_probe.store.run_status import StatusSettings, StatusWriter
from facet_probe.store.trial_store import TrialStore, commit_policy

log = logging.getLogger("facet_probe")
#: From this many planned API calls (several seconds of them at least) a run starts its report's figure helper
#: before the calls (`report.figure_process`); a short run would pay the helper's start for less than it hides. 300
#: calls at 20 requests/s (benchmarks/bench_api_peers.py, 2026-12-06), with the other start-up cuts of issue 64,
#: against 99db3fc: 1.0 s after the last answer against 2.1 s quiet, 3.5 s against 8.0 s beside six busy processes.
EARLY_HELPER_MIN_CALLS = 100


@dataclass(frozen=True)
class Invocation:
    """What the command line chose besides the config's values, which the audit reads: the option named for each
    config group (`model`, `facet`, `dataset`; None where left out: the experiment's panel), the overrides as
    typed (a panel refuses a `model.*` override it would ignore) and the user's config folders
    (`hydra.searchpath`, where an experiment's models, facets and datasets are looked up too)."""

    choices: Mapping[str, str | None]
    overrides: tuple[str, ...] = ()
    search_path: tuple[str, ...] = ()

    @classmethod
    def of(cls, hydra: DictConfig | HydraConf) -> Invocation:
        """From a composed config's `hydra` node (`compose(..., return_hydra_config=True)`, or the command line's
        `HydraConfig.get()`)."""
        return cls(choices=dict(hydra.runtime.choices), overrides=tuple(str(o) for o in hydra.overrides.task),
                   search_path=tuple(str(p) for p in hydra.searchpath or ()))


def run_audit(cfg: DictConfig, out_dir: str | Path | None = None, invocation: Invocation | None = None) -> Path:
    """Run the audit of a composed config into `out_dir`; the run folder. Needs no Hydra runtime (no
    `HydraConfig`, no callbacks): what the command line would have told it comes from `invocation`, by default
    the config's own `hydra` node (compose with `return_hydra_config=True`), which also gives the default
    `out_dir`, `hydra.run.dir` (where the command line writes). Writes the run folder's own files only, not
    Hydra's `.hydra/`."""
    hydra = cfg.get("hydra")
    if hydra is None and (invocation is None or out_dir is None):
        raise ConfigError("run_audit: the config has no hydra node to say which model, facet and dataset options it "
                          "composed: compose it with return_hydra_config=True, or pass out_dir= and invocation=")
    invocation = invocation or Invocation.of(hydra)
    run_dir = Path(out_dir if out_dir is not None else str(hydra.run.dir)).absolute()
    with searching(invocation.search_path):
        return audit_into(task_config(cfg), run_dir, invocation)


def audit_into(cfg: DictConfig, run_dir: Path, invocation: Invocation) -> Path:
    """Check the folder, prepare (items, manifest), pre-flight every model, run each through the store,
    then write metrics and report on exactly this run's trials; the last log line says how long the run took
    before its first call and after its last answer (`app.timeline`)."""
    timeline = Timeline()
    choices = invocation.choices
    model = choices.get("model") or str(cfg.model.name)  # an Invocation made in Python may leave the model out
    settings = run_identity.run_settings(cfg)
    run_identity.check_settings(run_dir, settings)  # a folder holds one set of settings: refuse before writing

    audit.check_model_overrides(cfg, model, invocation.overrides)
    audit.prefetch_options(cfg, choices.get("facet"), choices.get("dataset"), model)
    cells = audit.resolve_cells(cfg, choices.get("facet"), choices.get("dataset"))
    shortfalls = audit.load_cell_items(cells, cfg, choices.get("dataset"))  # {} unless allow_partial let one by
    rows = audit.build_run_manifest(cells, cfg)
    run_identity.check_manifest(run_dir, manifest_frame(rows))
    ledger = run_ledger(run_dir, budget_setting(cfg))  # cost.json: every paid call's estimate and spend, `budget_usd` (runners/cost/)
    models = execute.instantiate_models(cfg, model, ledger)  # every model's key and files, before any call
    judge = execute.instantiate_judge(cfg, ledger)  # its key checked now; its calls count against budget_usd too

    run_dir.mkdir(parents=True, exist_ok=True)
    folder = RunFolder(run_dir)
    status = StatusWriter(folder, StatusSettings(k=cfg.k, seed=cfg.seed, repeats=cfg.repeats, limit=cfg.limit,
                                                 prompt_mode=PromptMode.of(cfg.prompt.cot).value))
    atomic_write_text(folder.config_file, OmegaConf.to_yaml(redact_config(cfg)))  # resolved, no secrets
    audit.write_items(cells, folder.items_file)
    save_manifest(rows, folder.manifest_file)
    run_identity.record_settings(run_dir, settings)
    status.prepared(cells, rows, shortfalls)
    log.info("prepared %d manifest rows for %d cells in %s", len(rows), len(cells), run_dir)
    if cfg.prepare_only:
        status.write("prepared")
        return run_dir

    # API calls keep a run waiting on the network: the report's figures get their helper process now, so that its
    # imports (matplotlib: about a second of CPU) overlap the calls instead of following the last answer
    api_calls = len(rows) * sum(isinstance(runner, PaidRunner) for _, runner in models)
    with FigureDrawer(helper=api_calls >= EARLY_HELPER_MIN_CALLS) as drawer:
        planned_all, fingerprints = run_models(models, cells, rows, cfg, run_dir, status, timeline)
        if judge is not None:
            judge_run_folder(run_dir, judge)  # judgments.jsonl (cached, resumable) + semantic_flip.csv
        for dataset, skipped in {c.dataset: c.skipped_rows for c in cells if c.skipped_rows}.items():
            log.info("%s: rows no item can hold, left out (run_status.json cells[].skipped_rows)",
                     skipped_line(dataset, skipped))
        scope = audit.run_scope(planned_all, fingerprints, rows, cfg.store.shard, shortfalls)
        try:
            finish_run(folder, scope, status, MetricRules(cfg.bootstrap, cfg.bootstrap_seed), cfg.store.shard, drawer)
        finally:  # an incomplete run's report is written too
            log.info("%s: %s", run_dir.name, timeline.line())
    if judge is not None and ledger.stopped is not None:  # the models' calls are complete; the budget stopped the judge
        status.write("incomplete", hint="raise budget_usd= and re-run the same command to judge the rest")
        raise RunIncomplete(run_dir, f"the judge stopped at budget_usd={ledger.budget_usd:g}: "
                                     f"{ledger.stopped['calls_done']} of its {ledger.stopped['calls_planned']} "
                                     "calls made; the report's sem-flip covers the cases judged so far. Raise "
                                     "budget_usd= and re-run the same command to judge the rest")
    return run_dir


def run_models(models: list[tuple[str, Runner]], cells: list[audit.Cell], rows: list, cfg: DictConfig,
               run_dir: Path, status: StatusWriter, timeline: Timeline) -> tuple[list[audit.PlannedTrial], dict[str, str]]:
    """Each model's planned trials through the store, in turn (each runner closed after its turn); returns every
    planned trial and each model's fingerprint hash."""
    cache = Path(cfg.store.cache_dir) if cfg.store.cache_dir else None
    planned_all: list[audit.PlannedTrial] = []
    fingerprints: dict[str, str] = {}
    with TrialStore(RunFolder(run_dir).trials_file(cfg.store.shard), cache_path=cache,
                    wait_for_lock=cfg.store.wait_for_lock) as store:
        plans = execute.plan_paid_models(models, cells, rows, cfg, store)  # the panel's estimate, before any call
        for name, runner in models:
            try:
                plan = plans.get(name) or audit.plan_model(runner, name, cells, rows, cfg)
                fingerprints[name] = plan.fp_hash
                offers = declared(runner)  # beyond `Runner`: a paid model's answers are fsync'd one by one
                store.commit = commit_policy(cfg.store.durability, offers.cost is not None, cfg.store.group_trials,
                                             cfg.store.group_ms)
                planned_all += plan.planned
                counts = execute.run_model(runner, name, plan.fp_hash, plan.planned, store, show_progress=cfg.progress)
                timeline.calls(counts.first_call, counts.last_answer)
                store.sync()  # on disk before the counts say so (a full disk stops the run here, with one line)
                cost = offers.cost.cost_summary() if offers.cost is not None else None
                status.model_done(name, plan.fingerprint, counts, cost)
                log.info("%s: %d trials (%d already stored, %d re-keyed, %d reused, %d called, %d errors) in "
                         "%.1fs", name, counts.planned, counts.already_done, counts.migrated, counts.reused,
                         counts.called, counts.errors, counts.seconds)
            finally:
                runner.close()
    return planned_all, fingerprints
