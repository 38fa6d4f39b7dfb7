"""`python -m facet_probe`: run an order-sensitivity audit (Hydra app; resumes in place).

    python -m facet_probe                                  # the offline default panel
    python -m facet_probe model=qwen35_9b facet=option_order [dataset=mmlu_pro] [limit=20]
    python -m facet_probe -m model=a,b facet=option_order,evidence_chunk_order
    python -m facet_probe schema items > items.schema.json # the items file's JSON Schema (docs/datasets.md)

`facet-probe` (the console script) is the same app; from Python: `facet_probe.run_audit([...])` (facet_probe.api).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from facet_probe.app.boundary import (
    EXIT_USER_ERROR,
    RunIncomplete,
    default_group_appends,
    main_entry,
    run_app,
    stored_line,
)
from facet_probe.app.other_harnesses import equivalent_command
from facet_probe.app.schema_command import schema_command
from facet_probe.audit import execute
from facet_probe.audit import plan as audit
from facet_probe.audit.manifest import manifest_frame, save_manifest
from facet_probe.config import run_identity
from facet_probe.config.schema import register
from facet_probe.core.redact import redact_config
from facet_probe.datasets.base import skipped_line
from facet_probe.judge import judge_run_folder
from facet_probe.report.run import finish_run
from facet_probe.runners.cost import run_ledger
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.run_status import RunStatus
from facet_probe.store.trial_store import TrialStore, commit_policy

log = logging.getLogger("facet_probe")
register()

def run(cfg: DictConfig) -> Path:
    """Check the folder, prepare (items, manifest), pre-flight every model, run each through the store,
    then write metrics and report on exactly this run's trials."""
    hc = HydraConfig.get()
    choices = hc.runtime.choices
    run_dir = Path(hc.runtime.output_dir)
    settings = run_identity.run_settings(cfg)
    run_identity.check_settings(run_dir, settings)  # a folder holds one set of settings: refuse before writing

    audit.check_model_overrides(cfg, choices.get("model"), hc.overrides.task)
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
                store.sync()  # on disk before the counts say so (a full disk stops the run here, with one line)
                cost = runner.cost_summary() if hasattr(runner, "cost_summary") else None
                status.model_done(name, plan.fingerprint, counts, cost)
                log.info("%s: %d trials (%d already stored, %d re-keyed, %d reused, %d called, %d errors) in "
                         "%.1fs", name, counts.planned, counts.already_done, counts.migrated, counts.reused,
                         counts.called, counts.errors, counts.seconds)
            finally:
                runner.close()
    if judge is not None:
        judge_run_folder(run_dir, judge)  # judgments.jsonl (cached, resumable) + semantic_flip.csv
    for dataset, skipped in {c.dataset: c.skipped_rows for c in cells if c.skipped_rows}.items():
        log.info("%s: rows no item can hold, left out (run_status.json cells[].skipped_rows)",
                 skipped_line(dataset, skipped))
    scope = audit.run_scope(planned_all, fingerprints, rows, cfg.store.shard, shortfalls)
    finish_run(run_dir, cfg, scope, status, out=audit.report_dir(run_dir, cfg.store.shard))
    if judge is not None and ledger.stopped is not None:  # the models' calls are complete; the budget stopped the judge
        status.write("incomplete", hint="raise budget_usd= and re-run the same command to judge the rest")
        raise RunIncomplete(run_dir, f"the judge stopped at budget_usd={ledger.budget_usd:g}: "
                                     f"{ledger.stopped['calls_done']} of its {ledger.stopped['calls_planned']} "
                                     "calls made; the report's sem-flip covers the cases judged so far. Raise "
                                     "budget_usd= and re-run the same command to judge the rest")
    return run_dir


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    run_app(lambda: run(cfg), log, stored=lambda: stored_line([audit.trials_path(run_dir, cfg)], "trials"))


def cli() -> None:
    """The command line (`python -m facet_probe`, the `facet-probe` script)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if (line := equivalent_command(sys.argv[1:])) is not None:  # `--model hf --tasks mmlu`: lm-eval's habits
        print(f"error: {line}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    if sys.argv[1:2] == ["schema"]:  # `schema items`: a subcommand word, never a Hydra override
        sys.exit(schema_command(sys.argv[2:]))
    sys.argv = default_group_appends(sys.argv, ("experiment",))  # `+experiment=X` means `experiment=X`
    main_entry(main)  # a config Hydra refuses is one message and exit code 2 too


if __name__ == "__main__":
    cli()
