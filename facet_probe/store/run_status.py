"""`run_status.json`, written: what a run did and with what (counts, timings, versions, git commit, models). It is
read back as `store.run_folder.RunStatus`."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import platform
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from facet_probe.core.errors import RunFolderError
from facet_probe.core.trials import fingerprint_hash
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.run_folder import RunFolder

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class StatusSettings:
    """The run's settings that run_status.json records (the audit takes them from its config)."""

    k: int
    seed: int
    repeats: int
    limit: int | None
    prompt_mode: str  # `core.prompts.PromptMode`'s value


class StatusWriter:
    """Accumulates the run's facts and writes them atomically into its folder's run_status.json after every step."""

    def __init__(self, folder: RunFolder, settings: StatusSettings) -> None:
        self.path = folder.status_file
        self.started = time.perf_counter()
        self.data: dict[str, Any] = {
            "state": "running",
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "previous_sessions": previous_sessions(folder),
            "versions": library_versions(),
            "git_commit": git_commit(),
            "settings": asdict(settings),
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
        """Record `state` (and `extra` fields) and write the file."""
        self.data.update(extra)
        self.data["state"] = state
        self.data["elapsed_s"] = round(time.perf_counter() - self.started, 3)
        atomic_write_text(self.path, json.dumps(self.data, indent=2, sort_keys=True, default=str))


def previous_sessions(folder: RunFolder) -> int:
    """How many sessions ran in the folder before this one, as its run_status.json counts them; a damaged record
    counts one (nothing in it is needed to resume: this run writes it again, with a warning naming the damage)."""
    try:
        status = folder.status()
    except RunFolderError as exc:
        log.warning("%s; this run writes it again", str(exc).split("; ")[0])
        return 1
    return status.previous_sessions + 1 if folder.status_file.is_file() else 0
