"""`python -m facet_probe.explore input=<run folder(s)>`: one flip-explorer page over several audit or attack
runs (the report step writes one per run folder already)."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import hydra
from omegaconf import DictConfig

from facet_probe.app.boundary import main_entry, run_app
from facet_probe.report.__main__ import inputs_of
from facet_probe.report.explorer.build import explorer_for_runs
from facet_probe.report.explorer.page import DATA_DIR, PAGE, RECORD
from facet_probe.report.run import REPORT_FILE
from facet_probe.report.title import folders_title
from facet_probe.store.out_folder import check

log = logging.getLogger("facet_probe")


def explore(cfg: DictConfig) -> Path:
    """Build the page; return its path."""
    paths = inputs_of(cfg)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"input {p} does not exist (give an audit or attack run folder, a folder of "
                                    "run folders, or a trials .jsonl file)")
    single = len(paths) == 1 and paths[0].is_dir()
    out = Path(cfg.out) if cfg.out else (
        paths[0] if single else Path("outputs/explore") / datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    # its own page's folder, a report's (the report writes the page too) or an input folder: never a user's files
    check(out, "the explorer", [PAGE, f"{DATA_DIR}/{RECORD}", REPORT_FILE], inputs=[p for p in paths if p.is_dir()])
    title = cfg.title or folders_title("explorer", paths)
    page = explorer_for_runs(paths, out, title)
    print(f"explorer: {page}")
    return page


@hydra.main(config_path="../conf", config_name="explore_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_app(lambda: explore(cfg), log, announce=False)


def cli() -> None:
    """The command line (`python -m facet_probe.explore`, the `facet-probe-explore` script)."""
    main_entry(main)


if __name__ == "__main__":
    cli()
