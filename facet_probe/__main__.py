"""`python -m facet_probe`: run an order-sensitivity audit (Hydra app; resumes in place).

    python -m facet_probe                                  # the offline default panel
    python -m facet_probe model=qwen35_9b facet=option_order [dataset=mmlu_pro] [limit=20]
    python -m facet_probe -m model=a,b facet=option_order,evidence_chunk_order

`facet-probe` (the console script) is the same app; from Python: `facet_probe.run_audit([...])` (facet_probe.api).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from facet_probe import audit, run_identity
from facet_probe.atomic import atomic_write_text
from facet_probe.cli import default_group_appends, main_entry, run_app
from facet_probe.config import register
from facet_probe.judge import judge_run_folder
from facet_probe.manifest import manifest_frame, save_manifest
from facet_probe.prompts import PromptMode
from facet_probe.redact import redact_config
from facet_probe.report.run import finish_run
from facet_probe.run_status import RunStatus
from facet_probe.store import TrialStore, commit_policy
from facet_probe.trials import fingerprint_hash

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
    models = audit.instantiate_models(cfg, choices.get("model"))  # every model's key and files, before any call
    judge = instantiate(cfg.judge, _convert_="all") if cfg.judge and cfg.judge.get("_target_") else None
    if judge is not None:
        judge.runner.check_ready()  # a missing judge key fails before any model call

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

    mode = PromptMode.COT if cfg.prompt.cot else PromptMode.DIRECT
    cache = Path(cfg.store.cache_dir) if cfg.store.cache_dir else None
    planned_all: list[audit.PlannedTrial] = []
    fingerprints: dict[str, str] = {}
    with TrialStore(audit.trials_path(run_dir, cfg), cache_path=cache,
                    wait_for_lock=cfg.store.wait_for_lock) as store:
        for name, runner in models:
            try:
                runner.check_ready()
                fingerprint = runner.fingerprint()
                fingerprints[name] = fp_hash = fingerprint_hash(fingerprint)
                store.commit = commit_policy(cfg.store.durability, runner, cfg.store.group_trials, cfg.store.group_ms)
                legacy = [(fingerprint_hash(old["fingerprint"]), old.get("provenance") or {})
                          for old in getattr(runner, "legacy_fingerprints", list)()]  # re-keyed, never re-called
                planned = audit.plan_trials(cells, rows, name, fp_hash, mode, cfg.store.shard,
                                              share_repeated_orderings=cfg.share_repeated_orderings,
                                              legacy_fingerprints=legacy)
                planned_all += planned
                counts = audit.run_model(runner, name, fp_hash, planned, store, show_progress=cfg.progress)
                cost = runner.cost_summary() if hasattr(runner, "cost_summary") else None
                status.model_done(name, fingerprint, counts, cost)
                log.info("%s: %d trials (%d already stored, %d re-keyed, %d reused, %d called, %d errors) in "
                         "%.1fs", name, counts.planned, counts.already_done, counts.migrated, counts.reused,
                         counts.called, counts.errors, counts.seconds)
            finally:
                runner.close()
    if judge is not None:
        judge_run_folder(run_dir, judge)  # judgments.jsonl (cached, resumable) + semantic_flip.csv
    scope = audit.run_scope(planned_all, fingerprints, rows, cfg.store.shard, shortfalls)
    finish_run(run_dir, cfg, scope, status, out=audit.report_dir(run_dir, cfg.store.shard))
    return run_dir


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_app(lambda: run(cfg), log)


def cli() -> None:
    """The command line (`python -m facet_probe`, the `facet-probe` script)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.argv = default_group_appends(sys.argv, ("experiment",))  # `+experiment=X` means `experiment=X`
    main_entry(main)  # a config Hydra refuses is one message and exit code 2 too


if __name__ == "__main__":
    cli()
