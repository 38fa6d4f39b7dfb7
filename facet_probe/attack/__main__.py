"""`python -m facet_probe.attack`: adversarial CoT attacks on a local HF VLM (Hydra app; resumes in place).

    python -m facet_probe.attack                                   # tiny_vlm, stop-reasoning attack, CoT, synthetic set
    python -m facet_probe.attack model=<hf model> attack=stop_reasoning dataset=scienceqa limit=200
    python -m facet_probe.attack -m attack=none,answer,rationale,stop_reasoning prompt.cot=true,false

A thin shell: the work is `facet_probe.attack.run.run_attack` (callable from Python without Hydra), run in
Hydra's output folder. See docs/attacks.md.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from facet_probe.app.boundary import main_entry, run_app, stored_line
from facet_probe.attack.config import register
from facet_probe.attack.outputs import RESULTS
from facet_probe.attack.run import run_attack

log = logging.getLogger("facet_probe.attack")
register()


@hydra.main(config_path="../conf", config_name="attack_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    run_app(lambda: run_attack(cfg, run_dir), log, stored=lambda: stored_line([run_dir / RESULTS], "samples"))


def cli() -> None:
    """The command line (`python -m facet_probe.attack`, the `facet-probe-attack` script)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main_entry(main)  # a config Hydra refuses is one message and exit code 2 too


if __name__ == "__main__":
    cli()
