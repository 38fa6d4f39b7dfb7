"""`run_status.json`: what a run did and with what (counts, timings, versions, git commit, models)."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import platform
import subprocess
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from facet_probe.core.prompts import PromptMode
from facet_probe.core.trials import fingerprint_hash
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.reading import TrialsFileError, read_json_record

log = logging.getLogger(__name__)

STATUS_FILE = "run_status.json"
#: What to do about a damaged status record: the audit writes it again (nothing in it is needed to resume).
FIX_STATUS = ("re-run the audit command into this folder (it writes run_status.json again; the stored trials are "
              "kept and not called again), or delete it (a report then takes the models from the trials)")

LIBRARIES = ("facet_probe", "torch", "transformers", "tokenizers", "bitsandbytes", "hydra-core", "omegaconf",
             "pandas", "pymc", "arviz", "google-genai", "anthropic", "openai")


def library_versions() -> dict[str, str | None]:
    """The versions of the libraries a result depends on (a copy: the caller may add to it)."""
    return dict(_library_versions())


@functools.cache
def _library_versions() -> dict[str, str | None]:
    """Read once per process: the code that runs is what was imported, whatever is installed later (each read
    scans the installed packages' metadata, tens of milliseconds)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def read_status(run_dir: Path) -> dict[str, Any]:
    """A run folder's `run_status.json` ({} without one); a damaged one is a TrialsFileError saying what to do."""
    path = run_dir / STATUS_FILE
    return read_json_record(path, FIX_STATUS) if path.is_file() else {}


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the facet_probe checkout (with '+dirty' when modified), or None if not a checkout."""
    return _git_commit(path or Path(__file__).resolve().parent)


@functools.cache
def _git_commit(where: Path) -> str | None:
    """Asked of git once per process and folder (two subprocesses): the code that runs was imported at the
    start, so a later edit of the checkout does not change what ran."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


class RunStatus:
    """Accumulates the run's facts and writes them atomically after every step."""

    def __init__(self, run_dir: Path, cfg: DictConfig) -> None:
        self.path = run_dir / STATUS_FILE
        self.started = time.perf_counter()
        try:
            previous = read_status(run_dir)
        except TrialsFileError as exc:  # nothing in it is needed to resume: this run writes it again
            log.warning("%s; this run writes it again", str(exc).split("; ")[0])
            previous = {"previous_sessions": 0}
        self.data: dict[str, Any] = {
            "state": "running",
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "previous_sessions": previous.get("previous_sessions", 0) + (1 if previous else 0),
            "versions": library_versions(),
            "git_commit": git_commit(),
            "settings": {"k": cfg.k, "seed": cfg.seed, "repeats": cfg.repeats, "limit": cfg.limit,
                         "prompt_mode": PromptMode.of(cfg.prompt.cot).value},
            "models": {},
        }

    def prepared(self, cells, rows, shortfalls: dict | None = None) -> None:
        generator_versions = sorted({str(i.metadata["generator_version"]) for c in cells for i in c.items
                                     if "generator_version" in i.metadata})
        self.data["cells"] = [{"facet": c.facet_name, "dataset": c.dataset, "items": len(c.items),
                               **({"skipped_rows": c.skipped_rows} if c.skipped_rows else {})}
                              for c in cells]
        self.data["manifest_rows"] = len(rows)
        if shortfalls:  # datasets that gave fewer items than asked (dataset.allow_partial)
            self.data["dataset_shortfall"] = shortfalls
        if generator_versions:
            self.data["synthetic_generator_version"] = generator_versions
        self.write("prepared")

    def model_done(self, name: str, fingerprint: dict, counts, cost: dict | None = None) -> None:
        """Record a model's counts (and, for API models, tokens and estimated cost of this session)."""
        self.data["models"][name] = {"fingerprint": fingerprint, "fingerprint_hash": fingerprint_hash(fingerprint),
                                     **asdict(counts)}
        if cost is not None:
            self.data["models"][name]["cost_this_session"] = cost
        self.write("running")

    def write(self, state: str, **extra: Any) -> None:
        self.data.update(extra)
        self.data["state"] = state
        self.data["elapsed_s"] = round(time.perf_counter() - self.started, 3)
        atomic_write_text(self.path, json.dumps(self.data, indent=2, sort_keys=True, default=str))
