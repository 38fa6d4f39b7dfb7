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
from pathlib import Path

import msgspec

from facet_probe.core.interrupts import ctrl_c_held
from facet_probe.core.trials import Trial
from facet_probe.store.atomic import WriteFailed, atomic_path, write_failed
from facet_probe.store.durability import PER_TRIAL, Commit, Durability, commit_policy  # noqa: F401 (imported from here too)
from facet_probe.store.jsonl import _exclusive, append_whole, count_lines, repair_torn_tail
from facet_probe.store.locking import FileLock, KeyClaims
from facet_probe.store.reading import TrialsFileError, newer_field, newer_than_this, not_a_record

log = logging.getLogger(__name__)


class RecordLog:
    """One append-only JSONL file whose records are indexed by byte offset and read back by offset.

    Appends queue in memory and are written with one write and one fsync when the commit policy says (at once
    for per-trial), so a kill loses at most the queued tail, and a partly written group is a torn tail that
    the next open repairs. Offsets are assigned at the write, under the file's flock, so a file other
    processes append to too (the shared call cache) still indexes right. A write that fails (a full disk)
    keeps the whole lines it wrote and stops the log: `WriteFailed` says how many `what` the file holds."""

    def __init__(self, path: Path, commit: Commit = PER_TRIAL, what: str = "records") -> None:
        self.path = path
        self.commit = commit
        self.what = what
        repair_torn_tail(path)
        self._fh = path.open("ab")
        self._rfd = os.open(path, os.O_RDONLY)
        self._pending: list[tuple[bytes, Callable[[int], None]]] = []
        self._last_sync = time.monotonic()
        self._failed: WriteFailed | None = None  # the first failed write: nothing is written after it

    def append(self, line: str, written: Callable[[int], None]) -> None:
        """Queue one line (no newline inside); `written(offset)` is called once it is on disk."""
        self._pending.append(((line + "\n").encode("utf-8"), written))
        if len(self._pending) >= self.commit.every or (time.monotonic() - self._last_sync) * 1e3 >= self.commit.ms:
            self.sync()

    def sync(self) -> None:
        """Write the queued lines with one write and fsync them; where the write fails, the lines written whole
        are kept (and counted as written), the rest dropped, and `WriteFailed` raised, now and at every later
        append: a run stops at its first failed write and never reports as stored what is not."""
        if self._failed is not None:
            raise self._failed
        if self._pending:
            fd = self._fh.fileno()
            with ctrl_c_held():  # written and no longer queued, or neither: never written twice
                with _exclusive(fd):  # a repair by another process never cuts a group being written
                    offset, whole, error = append_whole(fd, [data for data, _ in self._pending])
                for data, written in self._pending[:whole]:
                    written(offset)
                    offset += len(data)
                lost = len(self._pending) - whole
                self._pending.clear()
            if error is not None:
                self._failed = write_failed(self.path, error, f"the run stopped at this first failed write: "
                                            f"{self.path.name} holds {count_lines(self.path)} {self.what}; "
                                            f"{lost} more made since {'was' if lost == 1 else 'were'} not written")
                raise self._failed from error
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
            if self._failed is None:  # a failed log has nothing queued; its error was raised where it happened
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
        self._log = RecordLog(self.path, commit, what="trials")
        self._trials: dict[str, Entry] = {}
        self._calls: dict[str, Entry] = {}
        self.cache: CallCache | None = None
        try:
            for offset, rec in scan_trials(self.path):
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

    def claim_calls(self, keys: Iterable[str]) -> set[str]:
        """The calls among `keys` this run is to make now: all of them without a shared cache; with one,
        those no other live run sharing it claims and it does not answer yet (claimed until `release_calls`)."""
        keys = list(keys)
        return set(keys) if self.cache is None else self.cache.claim(keys)

    def release_calls(self, keys: Iterable[str]) -> None:
        """Give up the shared cache's claims on `keys` (after their answers are committed)."""
        if self.cache is not None:
            self.cache.release(list(keys))

    def wait_for_calls(self, keys: Iterable[str]) -> list[str]:
        """Wait until some of `keys`, claimed by other runs, is answered in the shared cache or free again."""
        keys = list(keys)
        return keys if self.cache is None else self.cache.wait(keys)

    def append(self, trial: Trial) -> None:
        """Persist one trial: on disk (flushed + fsync'd) before returning under per-trial commit, with its
        group otherwise (`sync`/`close` commit what is queued)."""
        line = trial.to_json()
        rec = json.loads(line)
        self._index(rec, rec)
        if not rec.get("error"):
            self._log.append(line, lambda offset: self._written(rec, offset))
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
    """Responses by call key, shared across runs (append-only JSONL in a cache folder), indexed by offset.

    Runs that share the folder at the same time claim a call key before calling (`claim`, in `claims/`:
    `store.locking.KeyClaims`), so a call another live run is making is waited for (`wait`) and taken from the
    file once its answer is there (`refresh` reads what other processes appended), never paid for twice; a
    claim is given up once its answer is on disk (or the call failed), and a killed run's claims are free."""

    FIELDS = ("call_key", "raw_output", "thinking", "usage", "provenance", "latency_s", "model_fingerprint")
    #: how often `wait` reads the file for new answers, and how often it checks the claims' owners
    POLL_S, CLAIMS_EVERY_S = 0.05, 1.0

    def __init__(self, folder: Path, commit: Commit = PER_TRIAL) -> None:
        folder = Path(folder).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "calls.jsonl"
        self.path.touch()
        self._log = RecordLog(self.path, commit)
        self._entries: dict[str, Entry] = {}
        self._read_to = (0, 1)  # where the line after the last one indexed starts (byte offset, line number)
        try:
            self.refresh()
            self._claims = KeyClaims(folder / "claims")
        except BaseException:
            self._log.close()
            raise

    def refresh(self) -> None:
        """Index the answers appended since the last look (by other runs sharing the folder too)."""
        for offset, rec, after in scan_from(self.path, self._read_to):
            self._entries.setdefault(rec["call_key"], offset)
            self._read_to = after

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
                         lambda offset: self._written(key, offset))

    def _written(self, key: str, offset: int) -> None:
        """An answer is on disk: index it by offset and give up its claim (a waiting run may take it now)."""
        self._entries[key] = offset
        self._claims.release([key])

    def claim(self, keys: list[str]) -> set[str]:
        """Claim the calls among `keys` that no live run claims and the file does not answer; return them."""
        mine = self._claims.claim([k for k in keys if k not in self._entries])
        self.refresh()  # after claiming: an answer stored before its claim was given up is seen here
        answered = [k for k in mine if k in self._entries]
        self._claims.release(answered)
        return mine.difference(answered)

    def release(self, keys: list[str]) -> None:
        """Give up the claims on `keys` once what was answered is on disk (failed or unmade calls are free)."""
        self._log.sync()
        self._claims.release(keys)

    def wait(self, keys: list[str]) -> list[str]:
        """Wait until some of `keys` is answered in the file or no longer claimed by a live run; return those."""
        told, checked = False, -self.CLAIMS_EVERY_S
        while True:
            self.refresh()
            ready = [k for k in keys if k in self._entries]
            if not ready and time.monotonic() - checked >= self.CLAIMS_EVERY_S:
                ready, checked = self._claims.free(keys), time.monotonic()
            if ready or not keys:
                return ready
            if not told:
                log.info("%s: waiting for %d calls that another run sharing this cache is making", self.path,
                         len(keys))
                told = True
            time.sleep(self.POLL_S)

    def sync(self) -> None:
        self._log.sync()

    def close(self) -> None:
        try:
            self._log.close()
        finally:
            self._claims.close()


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
        for offset, rec in scan_trials(f):
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


def _lines(path: Path, start: tuple[int, int] = (0, 1)) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset, line) of each complete non-blank line from `start` (byte offset, its line
    number); an unterminated last line, which another process may be writing right now, is left out."""
    offset = start[0]
    with path.open("rb") as fh:
        fh.seek(offset)
        for lineno, line in enumerate(fh, start[1]):
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
    for offset, rec, _ in scan_from(path):
        yield offset, rec


#: What the store reads of every trial line: a JSON object with these keys.
TRIAL_KEYS = ("trial_key", "call_key")


def scan_trials(path: Path) -> Iterator[tuple[int, dict]]:
    """`scan_records` of a trials file, every line a trial record of a key scheme and scorer this facet_probe reads
    (a `TrialsFileError` naming the line if not)."""
    for offset, rec, (_, next_line) in scan_from(path):
        if type(rec) is not dict or "trial_key" not in rec or "call_key" not in rec:
            raise not_a_record(path, next_line - 1, rec, TRIAL_KEYS)
        if (newer := newer_field(rec)) is not None:  # its key or score would be misread: never re-keyed, paid again
            raise newer_than_this(path, next_line - 1, *newer)
        yield offset, rec


def scan_from(path: Path, start: tuple[int, int] = (0, 1)) -> Iterator[tuple[int, dict, tuple[int, int]]]:
    """`scan_records` from `start` (byte offset, line number), each record with where the next line starts,
    so a file other processes append to is read on from there later."""
    for lineno, offset, line in _lines(path, start):
        try:
            rec = _loads(line)
        except ValueError:  # not JSON, or not UTF-8 text
            raise TrialsFileError(
                f"{path}:{lineno}: malformed trial line (not JSON) before the end of the file, so not a torn "
                "write: the file was edited or damaged; fix or delete that line and re-run (a deleted trial "
                "is called again)") from None
        yield offset, rec, (offset + len(line), lineno + 1)
