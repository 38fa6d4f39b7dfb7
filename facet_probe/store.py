"""The append-only, content-addressed trial store: the unit of resume.

Each completed call is appended as one JSON line. When a line is forced to disk is the store's `Commit`
policy (`store.durability`): per trial, fsync'd before the next (a kill loses at most the line being written:
the default wherever a call costs money), or in groups of N trials or T ms (a kill loses at most that unsynced
tail, which the next run simply completes; for local models and reference policies, where one fsync per
trial was most of a run's time). On open, a torn last line is cut off (kept aside in `<file>.torn`) and the
completed trials are indexed by trial key and call key: the index holds keys and byte offsets only, and a
record is read back from the file when it is needed, so a 400k-trial store is never held in memory.
Re-running completes only what is missing, and an identical call (same settings, prompt, repeat) is never
paid for twice. Parallel shards write separate files that merge without duplicates.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

from facet_probe.atomic import atomic_path
from facet_probe.jsonl import _exclusive, repair_torn_tail
from facet_probe.locking import FileLock
from facet_probe.trial_io import TrialsFileError
from facet_probe.trials import Trial

log = logging.getLogger(__name__)


class Durability(StrEnum):
    """When an appended trial is forced to disk (`store.durability`)."""

    per_trial = "per_trial"  # fsync before the next trial: a kill loses at most the line being written
    group = "group"  # fsync every `store.group_trials` trials or `store.group_ms` ms: a kill loses that tail
    auto = "auto"  # per_trial for runners whose calls cost money (they report a cost), group for the rest


@dataclass(frozen=True)
class Commit:
    """A resolved commit policy: write + fsync once `every` trials are pending or `ms` ms have passed."""

    every: int = 1
    ms: float = 0.0


PER_TRIAL = Commit()


def commit_policy(durability: Durability | str, runner: Any = None, group_trials: int = 256,
                  group_ms: float = 1000.0) -> Commit:
    """One model's commit policy: `auto` keeps per-trial fsync for a runner that reports what its calls cost
    (API runners: a lost trial is paid for again) and groups the others (local models, reference policies)."""
    mode = Durability(durability)
    if mode is Durability.auto:
        mode = Durability.per_trial if hasattr(runner, "cost_summary") else Durability.group
    if mode is Durability.per_trial:
        return PER_TRIAL
    return Commit(every=max(1, int(group_trials)), ms=max(0.0, float(group_ms)))


class RecordLog:
    """One append-only JSONL file whose records are indexed by byte offset and read back by offset.

    Appends queue in memory and are written with one write and one fsync when the commit policy says (at once
    for per-trial), so a kill loses at most the queued tail, and a partly written group is a torn tail that
    the next open repairs. Offsets are assigned at the write, under the file's flock, so a file other
    processes append to too (the shared call cache) still indexes right."""

    def __init__(self, path: Path, commit: Commit = PER_TRIAL) -> None:
        self.path = path
        self.commit = commit
        repair_torn_tail(path)
        self._fh = path.open("ab")
        self._rfd = os.open(path, os.O_RDONLY)
        self._pending: list[tuple[bytes, Callable[[int], None]]] = []
        self._last_sync = time.monotonic()

    def scan(self) -> Iterator[tuple[int, dict]]:
        """(offset, record) of every line on disk."""
        return scan_records(self.path)

    def append(self, line: str, written: Callable[[int], None]) -> None:
        """Queue one line (no newline inside); `written(offset)` is called once it is on disk."""
        self._pending.append(((line + "\n").encode("utf-8"), written))
        if len(self._pending) >= self.commit.every or (time.monotonic() - self._last_sync) * 1e3 >= self.commit.ms:
            self.sync()

    def sync(self) -> None:
        """Write the queued lines with one write and fsync them."""
        if self._pending:
            fd = self._fh.fileno()
            with _exclusive(fd):  # a repair by another process never cuts a group being written
                offset = os.fstat(fd).st_size
                self._fh.write(b"".join(data for data, _ in self._pending))
                self._fh.flush()
                os.fsync(fd)
            for data, written in self._pending:
                written(offset)
                offset += len(data)
            self._pending.clear()
        self._last_sync = time.monotonic()

    def read(self, offset: int) -> dict:
        """The record whose line starts at `offset`."""
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.pread(self._rfd, 1 << 14, offset + len(line))
            if not chunk:
                break
            cut = chunk.find(b"\n")
            line += chunk if cut < 0 else chunk[:cut + 1]
        return _loads(line)

    def close(self) -> None:
        try:
            self.sync()
        finally:
            self._fh.close()
            os.close(self._rfd)


#: An index entry: a byte offset in the file, or the record itself while its line is still queued.
Entry = int | dict


class _SwitchableCommit:
    """The `commit` policy of a store over one `RecordLog`: switching it commits what is queued first."""

    _log: RecordLog

    @property
    def commit(self) -> Commit:
        return self._log.commit

    @commit.setter
    def commit(self, policy: Commit) -> None:
        self._switch(policy)

    def _switch(self, policy: Commit) -> None:
        self._log.sync()
        self._log.commit = policy


class TrialStore(_SwitchableCommit):
    """Trials of one run (or one shard of it), plus an optional call cache shared across runs."""

    def __init__(self, path: Path, cache_path: Path | None = None, wait_for_lock: bool = False,
                 commit: Commit = PER_TRIAL) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(self.path, wait=wait_for_lock).acquire()  # one writer per trials file
        try:
            self._open(cache_path, commit)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, cache_path: Path | None, commit: Commit) -> None:
        self._log = RecordLog(self.path, commit)
        self._trials: dict[str, Entry] = {}
        self._calls: dict[str, Entry] = {}
        self.cache: CallCache | None = None
        try:
            for offset, rec in self._log.scan():
                self._index(rec, offset)
            self.cache = CallCache(cache_path, commit) if cache_path else None
        except BaseException:
            self._log.close()
            raise

    def _switch(self, policy: Commit) -> None:
        """Switch the commit policy (per model of a panel), the shared call cache's with it."""
        super()._switch(policy)
        if self.cache is not None:
            self.cache.commit = policy

    def _index(self, rec: dict, entry: Entry) -> None:
        if rec.get("error"):
            return  # failed calls are retried, never reused
        self._trials[rec["trial_key"]] = entry
        self._calls.setdefault(rec["call_key"], entry)

    def _record(self, entry: Entry) -> dict:
        return dict(entry) if isinstance(entry, dict) else self._log.read(entry)

    def __len__(self) -> int:
        return len(self._trials)

    def done(self, trial_key: str) -> bool:
        return trial_key in self._trials

    def legacy_record(self, keys: Iterable[str], model: str) -> dict | None:
        """A successful record of `model` stored under an older key scheme of the same trial, if any."""
        for key in keys:
            entry = self._trials.get(key)
            if entry is not None and (rec := self._record(entry)).get("model") == model:
                return rec
        return None

    def cached_call(self, call_key: str) -> dict | None:
        """A stored successful record with this call key (this run first, then the shared cache)."""
        entry = self._calls.get(call_key)
        if entry is not None:
            return self._record(entry)
        return self.cache.get(call_key) if self.cache is not None else None

    def append(self, trial: Trial) -> None:
        """Persist one trial: on disk (flushed + fsync'd) before returning under per-trial commit, with its
        group otherwise (`sync`/`close` commit what is queued)."""
        line = trial.to_json()
        rec = json.loads(line)
        self._index(rec, rec)
        if not rec.get("error"):
            self._log.append(line, lambda offset, r=rec: self._written(r, offset))
        else:
            self._log.append(line, lambda offset: None)
        if self.cache is not None and not trial.error:
            self.cache.put(rec)

    def _written(self, rec: dict, offset: int) -> None:
        """A queued record is on disk: its index entries point at the file from now on."""
        if self._trials.get(rec["trial_key"]) is rec:
            self._trials[rec["trial_key"]] = offset
        if self._calls.get(rec["call_key"]) is rec:
            self._calls[rec["call_key"]] = offset

    def sync(self) -> None:
        """Commit what is queued now."""
        self._log.sync()
        if self.cache is not None:
            self.cache.sync()

    def records(self) -> list[dict]:
        """Every successful trial, read back from the file (one per trial key)."""
        self._log.sync()
        return [self._record(entry) for entry in self._trials.values()]

    def close(self) -> None:
        try:
            self._log.close()
            if self.cache is not None:
                self.cache.close()
        finally:
            self._lock.release()

    def __enter__(self) -> TrialStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CallCache(_SwitchableCommit):
    """Responses by call key, shared across runs (append-only JSONL in a cache folder), indexed by offset."""

    FIELDS = ("call_key", "raw_output", "thinking", "usage", "provenance", "latency_s", "model_fingerprint")

    def __init__(self, folder: Path, commit: Commit = PER_TRIAL) -> None:
        folder = Path(folder).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "calls.jsonl"
        self.path.touch()
        self._log = RecordLog(self.path, commit)
        self._entries: dict[str, Entry] = {}
        for offset, rec in self._log.scan():
            self._entries[rec["call_key"]] = offset

    def get(self, call_key: str) -> dict | None:
        entry = self._entries.get(call_key)
        if entry is None:
            return None
        return dict(entry) if isinstance(entry, dict) else self._log.read(entry)

    def put(self, rec: dict) -> None:
        key = rec["call_key"]
        if key in self._entries:
            return
        entry = {k: rec.get(k) for k in self.FIELDS}
        self._entries[key] = entry
        self._log.append(json.dumps(entry, ensure_ascii=False, sort_keys=True),
                         lambda offset: self._entries.__setitem__(key, offset))

    def sync(self) -> None:
        self._log.sync()

    def close(self) -> None:
        self._log.close()


def merge_trial_files(files: Iterable[Path], out: Path) -> int:
    """Merge shard files into `out`, one record per trial key (successful records win); return count.
    Holds `out`'s lock meanwhile: an audit appending to it would otherwise lose its lines to the merge."""
    with FileLock(out):
        return _merge(files, out)


def _merge(files: Iterable[Path], out: Path) -> int:
    """Two passes, keys in memory only: pick each key's record (file, offset), then copy those lines."""
    files = [Path(f) for f in files]
    winner: dict[str, tuple[int, int, bool]] = {}  # trial key -> (file, offset, is error)
    for i, f in enumerate(files):
        repair_torn_tail(f)
        for offset, rec in scan_records(f):
            key, failed = rec["trial_key"], bool(rec.get("error"))
            if key not in winner or (winner[key][2] and not failed):
                winner[key] = (i, offset, failed)
    chosen = {(i, offset) for i, offset, _ in winner.values()}
    with atomic_path(out) as tmp, tmp.open("wb") as fh:
        for i, f in enumerate(files):
            for _, offset, line in _lines(f):
                if (i, offset) in chosen:
                    fh.write(line.rstrip(b"\r\n") + b"\n")
    return len(winner)


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset, line) of each complete non-blank line (an unterminated last line, which another
    process may be writing right now, is left out)."""
    offset = 0
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith(b"\n"):
                return
            if line.strip():
                yield lineno, offset, line
            offset += len(line)


_DECODER = msgspec.json.Decoder()


def _loads(line: bytes) -> dict:
    """msgspec's decode (a few times faster), `json`'s where msgspec refuses a line (NaN), so json's rules hold."""
    try:
        return _DECODER.decode(line)
    except msgspec.DecodeError:
        return json.loads(line)


def scan_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(offset, record) of every complete line; a damaged line is a `TrialsFileError` saying where."""
    for lineno, offset, line in _lines(path):
        try:
            rec = _loads(line)
        except json.JSONDecodeError:
            raise TrialsFileError(
                f"{path}:{lineno}: malformed trial line (not JSON) before the end of the file, so not a torn "
                "write: the file was edited or damaged; fix or delete that line and re-run (a deleted trial "
                "is called again)") from None
        yield offset, rec


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
