"""`python -m facet_probe.paper input=<run folders> [target=<name>]`: the papers' tables and figures from run
folders (docs/paper.md). `target=paper` (the default) builds every target whose inputs the folders hold."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import hydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from facet_probe.app.boundary import main_entry, run_app
from facet_probe.config.schema import AuditConfig, check_counts, check_seeds
from facet_probe.core.errors import ConfigError
from facet_probe.metrics.flips import INTERVAL_SEED
from facet_probe.paper.inputs import run_folders
from facet_probe.paper.policies import parse_subsets
from facet_probe.paper.targets import TARGETS, Inputs, MissingInput, needs_input
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.out_folder import claim

log = logging.getLogger("facet_probe.paper")
ALL = "paper"
SOURCES = "sources.json"
PUBLISHED = "facet_probe/paper/published"


def build(cfg: DictConfig) -> Path:
    """Build the chosen target (or all of them), print what each wrote or why it was skipped."""
    if cfg.target != ALL and cfg.target not in TARGETS:
        raise ConfigError(f"target={cfg.target!r}: choose one of {ALL}, {', '.join(TARGETS)}")
    check_counts(cfg, {"bootstrap": AuditConfig.bootstrap})  # bootstrap=nan, 0: one line (the default: the audit's)
    check_seeds(cfg, {"seed": INTERVAL_SEED})  # before any target reads or writes
    paths = input_paths(cfg)
    if missing := [str(p) for p in paths if not p.exists()]:  # one message, not one per target
        raise ConfigError(f"input {', '.join(missing)} does not exist; give run folders, a sweep folder or a "
                          "folder of run folders (input=[a,b] for several)")
    claim_out(Path(cfg.out))
    ctx = Inputs(paths, Path(cfg.out), n_boot=cfg.bootstrap, seed=cfg.seed,
                 mechanism=cast(dict, OmegaConf.to_container(cfg.mechanism, resolve=True)) if cfg.get("mechanism") else {},
                 subsets=parse_subsets(cfg.mitigation.subsets))
    if cfg.target != ALL:
        files = TARGETS[cfg.target](ctx)
        record_sources(ctx.out, cfg.target, files, paths)
        print(f"{cfg.target}: " + ", ".join(str(f) for f in files))
        return ctx.out
    failed = []
    for name, target in TARGETS.items():  # every target, each on its own: one that cannot run stops no other
        try:
            files = target(ctx)
        except MissingInput as exc:
            print(f"{name}: skipped ({exc})")
            continue
        except ConfigError as exc:
            failed.append(name)
            print(f"{name}: failed ({exc})")
            continue
        record_sources(ctx.out, name, files, paths)
        print(f"{name}: " + ", ".join(str(f) for f in files))
    if failed:
        raise ConfigError(f"{len(failed)} target(s) could not be built from these inputs: {', '.join(failed)} "
                          "(each one's reason is printed above)")
    return ctx.out


def claim_out(out: Path) -> None:
    """`out` is a new or empty folder or an earlier build's (it holds sources.json), else one line refuses it
    (`store.out_folder.claim`); a new one gets its sources.json at once, so that a build stopped before its
    first target still leaves a folder the next build knows as its own."""
    claim(out, "the paper build", [SOURCES])
    if not (out / SOURCES).is_file():
        atomic_write_text(out / SOURCES, "{}")


def record_sources(out: Path, target: str, files: list[Path], paths: list[Path]) -> Path:
    """`<out>/sources.json`: for every file a target wrote, the target, the `input=` folders and the audit run
    folders found under them (or the published data), so each table and figure names what it was built from.
    Entries of files other builds wrote into the same folder are kept."""
    path = out / SOURCES
    sources = json.loads(path.read_text()) if path.is_file() else {}
    try:
        runs = [str(f) for f in run_folders(paths)] if paths else []
    except MissingInput:  # an ODI fit, a decoder grid or attack runs: the input folders say it
        runs = []
    entry = {"target": target, "inputs": [str(p) for p in paths] or [f"published data ({PUBLISHED})"],
             "run_folders": runs, "built_at": datetime.now(UTC).isoformat(timespec="seconds")}
    sources.update({Path(f).name: entry for f in files})
    atomic_write_text(path, json.dumps(dict(sorted(sources.items())), indent=1))
    return path


def input_paths(cfg: DictConfig) -> list[Path]:
    """The `input=` folders; none is needed only by a target that reads the published data alone (`verify`)."""
    if cfg.get("input") is None:
        if cfg.target != ALL and not needs_input(TARGETS[cfg.target]):
            return []
        free = ", ".join(f"target={name}" for name, target in TARGETS.items() if not needs_input(target))
        raise ConfigError(f"target={cfg.target} needs input=<run folder | folder of run folders | [a,b]> "
                          f"(docs/paper.md); only {free} reads the published data alone")
    raw = cfg.input if isinstance(cfg.input, ListConfig) else [cfg.input]
    return [Path(str(p)).expanduser() for p in raw]


@hydra.main(config_path="../conf", config_name="paper_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_app(lambda: build(cfg), log)


def cli() -> None:
    """The command line (`python -m facet_probe.paper`, the `facet-probe-paper` script)."""
    main_entry(main)


if __name__ == "__main__":
    cli()
