"""The append-only, content-addressed trial store: the unit of resume.

Each completed call is appended as one JSON line and fsync'd before the next, so a killed run
loses at most the line being written. On open, a torn last line is cut off (and kept aside in
`<file>.torn` for inspection) and the completed trials are indexed by trial key and call key:
re-running completes only what is missing, and an identical call (same settings, prompt, repeat)
is never paid for twice. Parallel shards write separate files that merge without duplicates.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from facet_probe.atomic import atomic_path
from facet_probe.jsonl import append_record, iter_records, repair_torn_tail
from facet_probe.locking import FileLock
from facet_probe.trials import Trial

log = logging.getLogger(__name__)


class TrialStore:
    """Trials of one run (or one shard of it), plus an optional call cache shared across runs."""

    def __init__(self, path: Path, cache_path: Path | None = None, wait_for_lock: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(self.path, wait=wait_for_lock).acquire()  # one writer per trials file
        try:
            self._open(cache_path)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, cache_path: Path | None) -> None:
        repair_torn_tail(self.path)
        self.trials: dict[str, dict] = {}
        self.calls: dict[str, dict] = {}
        for rec in iter_records(self.path) if self.path.exists() else ():
            self._index(rec)
        self.cache = CallCache(cache_path) if cache_path else None
        self._fh = self.path.open("a", encoding="utf-8")

    def _index(self, rec: dict) -> None:
        if rec.get("error"):
            return  # failed calls are retried, never reused
        self.trials[rec["trial_key"]] = rec
        self.calls.setdefault(rec["call_key"], rec)

    def done(self, trial_key: str) -> bool:
        return trial_key in self.trials

    def legacy_record(self, keys: Iterable[str], model: str) -> dict | None:
        """A successful record of `model` stored under an older key scheme of the same trial, if any."""
        for key in keys:
            rec = self.trials.get(key)
            if rec is not None and rec.get("model") == model:
                return rec
        return None

    def cached_call(self, call_key: str) -> dict | None:
        """A stored successful record with this call key (this run first, then the shared cache)."""
        hit = self.calls.get(call_key)
        if hit is None and self.cache is not None:
            hit = self.cache.get(call_key)
        return hit

    def append(self, trial: Trial) -> None:
        """Persist one trial durably (flush + fsync) before returning."""
        line = trial.to_json()
        self._fh.write(line + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        rec = json.loads(line)
        self._index(rec)
        if self.cache is not None and not trial.error:
            self.cache.put(rec)

    def records(self) -> list[dict]:
        return list(self.trials.values())

    def close(self) -> None:
        self._fh.close()
        if self.cache is not None:
            self.cache.close()
        self._lock.release()

    def __enter__(self) -> TrialStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CallCache:
    """Responses by call key, shared across runs (append-only JSONL in a cache folder)."""

    FIELDS = ("call_key", "raw_output", "thinking", "usage", "provenance", "latency_s", "model_fingerprint")

    def __init__(self, folder: Path) -> None:
        folder = Path(folder).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "calls.jsonl"
        repair_torn_tail(self.path)
        self.entries: dict[str, dict] = {}
        if self.path.exists():
            for rec in iter_records(self.path):
                self.entries[rec["call_key"]] = rec
        self._fh = self.path.open("a", encoding="utf-8")

    def get(self, call_key: str) -> dict | None:
        return self.entries.get(call_key)

    def put(self, rec: dict) -> None:
        if rec["call_key"] in self.entries:
            return
        entry = {k: rec.get(k) for k in self.FIELDS}
        append_record(self._fh, entry)
        self.entries[rec["call_key"]] = entry

    def close(self) -> None:
        self._fh.close()


def merge_trial_files(files: Iterable[Path], out: Path) -> int:
    """Merge shard files into `out`, one record per trial key (successful records win); return count.
    Holds `out`'s lock meanwhile: an audit appending to it would otherwise lose its lines to the merge."""
    with FileLock(out):
        return _merge(files, out)


def _merge(files: Iterable[Path], out: Path) -> int:
    merged: dict[str, dict] = {}
    for f in files:
        repair_torn_tail(Path(f))
        for rec in iter_records(Path(f)):
            key = rec["trial_key"]
            if key not in merged or (merged[key].get("error") and not rec.get("error")):
                merged[key] = rec
    with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for rec in merged.values():
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    return len(merged)


def shard_file(run_dir: Path, shard: str | None) -> Path:
    """`trials.jsonl`, or `trials.shard-<i>-of-<n>.jsonl` for a shard `i/n`."""
    if not shard:
        return run_dir / "trials.jsonl"
    i, n = parse_shard(shard)
    return run_dir / f"trials.shard-{i}-of-{n}.jsonl"


def parse_shard(shard: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in str(shard).split("/"))
    except ValueError:
        raise ValueError(f"store.shard must look like 'i/n' (e.g. 0/4), got {shard!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"store.shard {shard!r}: need 0 <= i < n")
    return i, n
