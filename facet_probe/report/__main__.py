"""`python -m facet_probe.report input=<run folder(s) or trials file>`: recompute metrics, tables and
figures from stored trials (merged shards, several runs, or FACET-PROBE v0.0.1 trial files)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import hydra
import pandas as pd
from omegaconf import DictConfig, ListConfig

from facet_probe.report.run import read_items, write_outputs
from facet_probe.run_trials import RunScope, check_one_run, folder_scope, select_run_trials
from facet_probe.store import merge_trial_files
from facet_probe.trial_io import load_trial_frame


def inputs_of(cfg: DictConfig) -> list[Path]:
    raw = cfg.input if isinstance(cfg.input, ListConfig) else [cfg.input]
    return [Path(str(p)).expanduser() for p in raw]


def merge_shards(folder: Path) -> int | None:
    """Merge a folder's shard files (and any existing trials.jsonl) into trials.jsonl."""
    shards = sorted(folder.glob("trials.shard-*.jsonl"))
    if not shards:
        return None
    existing = [folder / "trials.jsonl"] if (folder / "trials.jsonl").exists() else []
    return merge_trial_files(existing + shards, folder / "trials.jsonl")


def run_trials(path: Path) -> tuple[pd.DataFrame, RunScope | None, int]:
    """One input's trials: a run folder's, selected by its manifest (one K, seed and fingerprint per model);
    a bare trials file's, refused when it answers a row twice."""
    if path.is_dir():
        stored = load_trial_frame(path)
        scope = folder_scope(path, stored)
        if scope is not None:
            trials, left_out = select_run_trials(stored, scope)
            return trials, scope, left_out
    else:
        stored = load_trial_frame(path)
    check_one_run(stored, str(path))
    return stored, None, 0


def report(cfg: DictConfig) -> Path:
    paths = inputs_of(cfg)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"input {p} does not exist (give a run folder or a trials .jsonl file)")
    if cfg.merge_shards:
        for p in paths:
            if p.is_dir() and (n := merge_shards(p)) is not None:
                print(f"merged shards of {p} into trials.jsonl ({n} trials)")
    single_folder = len(paths) == 1 and paths[0].is_dir()
    out = Path(cfg.out) if cfg.out else (
        paths[0] if single_folder else Path("outputs/report") / datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    parts = [run_trials(p / "trials.jsonl" if p.is_dir() and not (p / "manifest.parquet").is_file()
                        and (p / "trials.jsonl").exists() else p) for p in paths]
    trials = pd.concat([t for t, _, _ in parts], ignore_index=True)
    scopes = [s for _, s, _ in parts if s is not None]
    scope = RunScope(pd.concat([s.expected for s in scopes], ignore_index=True), {}) if scopes else None
    item_files = [(p if p.is_dir() else p.parent) / "items.jsonl" for p in paths]
    outputs = write_outputs(trials, out, read_items(item_files), n_boot=cfg.bootstrap, seed=cfg.seed,
                            title=f"facet_probe report: {', '.join(p.name for p in paths)}", scope=scope,
                            left_out=sum(n for _, _, n in parts))
    print(f"{len(trials)} trials, {len(outputs.summary)} cells -> {out}"
          + (f"; {outputs.missing} expected trials missing (see report.md)" if outputs.missing else ""))
    return out


@hydra.main(config_path="../conf", config_name="report_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        report(cfg)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
