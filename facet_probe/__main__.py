"""`python -m facet_probe`: run an order-sensitivity audit (Hydra app; resumes in place).

    python -m facet_probe                                  # the offline default panel
    python -m facet_probe model=qwen35_9b facet=option_order [dataset=mmlu_pro] [limit=20]
    python -m facet_probe -m model=a,b facet=option_order,evidence_chunk_order
    python -m facet_probe schema items > items.schema.json # the items file's JSON Schema (docs/datasets.md)

`facet-probe` (the console script) is the same app; from Python: `facet_probe.run_audit([...])` (facet_probe.api).
The audit itself is `facet_probe.app.audit_job.run_audit(cfg, out_dir)` (no Hydra runtime); this shell reads
Hydra's run folder and choices and imports only what Hydra needs to compose.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import facet_probe.config.loading  # noqa: F401  (registers fp_app_groups, which --help reads)
from facet_probe.app import timeline
from facet_probe.app.boundary import EXIT_USER_ERROR, default_group_appends, main_entry, run_app, stored_line
from facet_probe.app.other_harnesses import equivalent_command
from facet_probe.config.schema import register

log = logging.getLogger("facet_probe")
register()


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    # the audit itself (runners, pandas, the report) is imported once Hydra has composed a run: `--help` and a
    # command line Hydra refuses load none of it
    from facet_probe.app.audit_job import Invocation, run_audit
    from facet_probe.store.run_folder import RunFolder

    chosen = HydraConfig.get()  # the edge: the run folder and what the command line chose, read here only
    run_dir = Path(chosen.runtime.output_dir)
    run_app(lambda: run_audit(cfg, run_dir, Invocation.of(chosen)), log,
            stored=lambda: stored_line([RunFolder(run_dir).trials_file(cfg.store.shard)], "trials"))


def cli() -> None:
    """The command line (`python -m facet_probe`, the `facet-probe` script)."""
    timeline.from_process_start()  # the closing log line's clock: start-up counts from the process's start
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if (line := equivalent_command(sys.argv[1:])) is not None:  # `--model hf --tasks mmlu`: lm-eval's habits
        print(f"error: {line}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    if sys.argv[1:2] == ["schema"]:  # `schema items`: a subcommand word, never a Hydra override
        from facet_probe.app.schema_command import schema_command

        sys.exit(schema_command(sys.argv[2:]))
    sys.argv = default_group_appends(sys.argv, ("experiment",))  # `+experiment=X` means `experiment=X`
    main_entry(main)  # a config Hydra refuses is one message and exit code 2 too


if __name__ == "__main__":
    cli()
