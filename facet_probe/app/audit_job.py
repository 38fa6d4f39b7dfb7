"""The audit job: a composed config -> its run folder (items, manifest, trials, report). `python -m facet_probe`
(the Hydra shell in `facet_probe/__main__.py`) and `facet_probe.run_audit` run it in Hydra's output folder; its
imports (the runners' base, pandas, the report) load only once a run starts, never for `--help`."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from facet_probe.app.boundary import RunIncomplete
from facet_probe.app.timeline import Timeline
from facet_probe.audit import execute
from facet_probe.audit import plan as audit
from facet_probe.audit.manifest import manifest_frame, save_manifest
from facet_probe.config import run_identity
from facet_probe.core.redact import redact_config
from facet_probe.datasets.base import skipped_line
from facet_probe.judge import judge_run_folder
from facet_probe.report.figure_process import FigureDrawer
from facet_probe.report.run import finish_run
from facet_probe.runners.base import Runner
from facet_probe.runners.cost import PaidRunner, run_ledger
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.run_status import RunStatus
from facet_probe.store.trial_store import TrialStore, commit_policy

log = logging.getLogger("facet_probe")
#: From this many planned API calls (several seconds of them at least) a run starts its report's figure helper
#: before the calls (`report.figure_process`); a short run would pay the helper's start for less than it hides. 300
#: calls at 20 requests/s (benchmarks/bench_api_peers.py, 2026-12-06), with the other start-up cuts of issue 64,
#: against 99db3fc: 1.0 s after the last answer against 2.1 s quiet, 3.5 s against 8.0 s beside six busy processes.
EARLY_HELPER_MIN_CALLS = 100


def run(cfg: DictConfig) -> Path:
    """Check the folder, prepare (items, manifest), pre-flight every model, run each through the store,
    then write metrics and report on exactly this run's trials; the last log line says how long the run took
    before its first call and after its last answer (`app.timeline`)."""
    timeline = Timeline()
    hc = HydraConfig.get()
    choices = hc.runtime.choices
    run_dir = Path(hc.runtime.output_dir)
    settings = run_identity.run_settings(cfg)
    run_identity.check_settings(run_dir, settings)  # a folder holds one set of settings: refuse before writing

    audit.check_model_overrides(cfg, choices.get("model"), hc.overrides.task)
    audit.prefetch_options(cfg, choices.get("facet"), choices.get("dataset"), choices.get("model"))
    cells = audit.resolve_cells(cfg, choices.get("facet"), choices.get("dataset"))
    shortfalls = audit.load_cell_items(cells, cfg, choices.get("dataset"))  # {} unless allow_partial let one by
    rows = audit.build_run_manifest(cells, cfg)
    run_identity.check_manifest(run_dir, manifest_frame(rows))
    ledger = run_ledger(cfg)  # cost.json: every paid call's estimate and spend, `budget_usd` (facet_probe/runners/cost.py)
    models = execute.instantiate_models(cfg, choices.get("model"), ledger)  # every model's key and files, before any call
    judge = execute.instantiate_judge(cfg, ledger)  # its key checked now; its calls count against budget_usd too

    run_dir.mkdir(parents=True, exist_ok=True)
    status = RunStatus(run_dir, cfg)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(redact_config(cfg)))  # resolved, no secrets
    audit.write_items(cells, run_dir / "items.jsonl")
    save_manifest(rows, run_dir / "manifest.parquet")
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
            finish_run(run_dir, cfg, scope, status, out=audit.report_dir(run_dir, cfg.store.shard),
                       drawer=drawer)
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
               run_dir: Path, status: RunStatus, timeline: Timeline) -> tuple[list[audit.PlannedTrial], dict[str, str]]:
    """Each model's planned trials through the store, in turn (each runner closed after its turn); returns every
    planned trial and each model's fingerprint hash."""
    cache = Path(cfg.store.cache_dir) if cfg.store.cache_dir else None
    planned_all: list[audit.PlannedTrial] = []
    fingerprints: dict[str, str] = {}
    with TrialStore(audit.trials_path(run_dir, cfg), cache_path=cache,
                    wait_for_lock=cfg.store.wait_for_lock) as store:
        plans = execute.plan_paid_models(models, cells, rows, cfg, store)  # the panel's estimate, before any call
        for name, runner in models:
            try:
                plan = plans.get(name) or audit.plan_model(runner, name, cells, rows, cfg)
                fingerprints[name] = plan.fp_hash
                store.commit = commit_policy(cfg.store.durability, runner, cfg.store.group_trials, cfg.store.group_ms)
                planned_all += plan.planned
                counts = execute.run_model(runner, name, plan.fp_hash, plan.planned, store, show_progress=cfg.progress)
                timeline.calls(counts.first_call, counts.last_answer)
                store.sync()  # on disk before the counts say so (a full disk stops the run here, with one line)
                cost = runner.cost_summary() if hasattr(runner, "cost_summary") else None
                status.model_done(name, plan.fingerprint, counts, cost)
                log.info("%s: %d trials (%d already stored, %d re-keyed, %d reused, %d called, %d errors) in "
                         "%.1fs", name, counts.planned, counts.already_done, counts.migrated, counts.reused,
                         counts.called, counts.errors, counts.seconds)
            finally:
                runner.close()
    return planned_all, fingerprints
