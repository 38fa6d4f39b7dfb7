"""A lock file per written file (`trials.jsonl.lock`, a shard's own, the report's): one writer at a time.

The lock file is created with O_CREAT|O_EXCL and holds its holder as JSON (host, pid, started_at,
command); the holder also keeps an fcntl flock on it as a second guard. A second process finds the lock
held and stops with a message naming the holder, or waits for it (`wait=True`). A lock left by a crashed
process (same host, pid no longer alive) is taken over with a warning. See docs/architecture.md, "Locks",
for what this guarantees on local and network file systems.

`KeyClaims` is the same idea per key, for work that processes sharing a folder must not do twice (a call of
the shared call cache): a claim is a small file naming its owner, and the owner is a `FileLock` its process
holds for as long as it claims, so a claim of a killed process is free again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import socket
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

#: a lock (or claim) file younger than this that names no holder is taken to be one being created
CREATING_GRACE_S = 5.0


class RunLocked(Exception):
    """Another process holds the lock of a file this process wants to write (a user error: exit code 2)."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: written into the lock file."""

    host: str
    pid: int
    started_at: str
    command: str

    @classmethod
    def me(cls) -> Holder:
        return cls(host=socket.gethostname(), pid=os.getpid(),
                   started_at=datetime.now(UTC).isoformat(timespec="seconds"), command=_command())

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.started_at} ({self.command})"


def lock_path(path: str | Path) -> Path:
    """The lock file of `path`: `<path>.lock` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


class FileLock:
    """The lock of one file; `acquire` / `release`, or use it as a context manager.

    `wait_option` is the setting the error message offers for waiting (None: the app has none).
    """

    def __init__(self, path: str | Path, *, wait: bool = False, poll_s: float = 0.5,
                 timeout_s: float | None = None, wait_option: str | None = "store.wait_for_lock=true") -> None:
        self.target = Path(path)
        self.path = lock_path(path)
        self.wait = wait
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.wait_option = wait_option
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FileLock:
        """Take the lock (waiting if `wait`); raise RunLocked when another live process holds it."""
        started = time.monotonic()
        told = False
        while True:
            holder = self._try_acquire()
            if holder is None:
                return self
            if not self.wait:
                raise RunLocked(self._message(holder))
            if self.timeout_s is not None and time.monotonic() - started > self.timeout_s:
                raise RunLocked(f"gave up after {self.timeout_s:.0f} s: " + self._message(holder))
            if not told:
                log.warning("%s is locked by %s; waiting for it to finish", self.target, holder.describe())
                told = True
            time.sleep(self.poll_s)

    def release(self) -> None:
        """Remove the lock file (if it is still ours) and drop the flock."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if _same_file(fd, self.path):
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # drops the flock

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- one attempt --------------------------------------------------------------------------------------
    def _try_acquire(self) -> Holder | _Unknown | None:
        """Take the lock now and return None, or return who holds it (UNKNOWN while it writes itself in)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = Holder.me()
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            return self._check_existing(me)
        _flock(fd, block=True)  # before writing: a holder written in the file always holds the flock
        _write_holder(fd, me)
        self._fd = fd
        return None

    def _check_existing(self, me: Holder) -> Holder | None | _Unknown:
        """Who holds the existing lock file; or take it over (and return None) when its holder is gone.

        On this host a flock we could take proves the holder gone; without flock, its pid must be dead.
        """
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return self._try_acquire()  # released meanwhile: try again at once
        keep = False
        try:
            flocked = _flock(fd)
            if flocked is False:  # a live holder keeps its flock: held, whatever the file says
                return _read_holder(fd) or UNKNOWN
            if not _same_file(fd, self.path):
                return self._try_acquire()  # released and re-created meanwhile
            holder = _read_holder(fd)
            if holder is None:
                if time.time() - os.fstat(fd).st_mtime < CREATING_GRACE_S:
                    return UNKNOWN  # its creator is about to write itself in
                log.warning("%s: taking over an empty or unreadable lock file", self.path)
            elif holder.host != me.host:
                return holder  # another host's process cannot be checked from here: held
            elif flocked is None and pid_alive(holder.pid):
                return holder  # no flock here: a live pid (perhaps a recycled one) counts as the holder
            else:
                log.warning("%s: taking over a stale lock of %s (that process is gone)", self.path,
                            holder.describe())
            _write_holder(fd, me)
            self._fd, keep = fd, True
            return None
        finally:
            if not keep:
                os.close(fd)

    def _message(self, holder: Holder | _Unknown) -> str:
        wait = f", or pass {self.wait_option} to wait for it" if self.wait_option else ""
        return (f"{self.target} is being written by another process: {holder.describe()}. Wait for it to "
                f"finish{wait}; if that process is gone (e.g. killed on another machine), delete {self.path} "
                "and run again")


class KeyClaims:
    """Claims on keys in `folder`, one file per claimed key naming its owner; this process's owner lock
    (`owners/<owner>.lock`, a `FileLock`) is held until `close`, so a claim whose owner's process is gone (on
    this host: its flock went with it) is free to take over, and a killed claimant never blocks anyone."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        (self.folder / "owners").mkdir(parents=True, exist_ok=True)
        self.owner = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self._owner_lock = FileLock(self.folder / "owners" / self.owner, wait_option=None).acquire()
        self._mine: set[str] = set()

    def claim(self, keys: list[str]) -> set[str]:
        """Take every free claim among `keys` (a claim of a gone owner is taken over); return the keys held."""
        taken = {key for key in keys if key in self._mine or self._create(key)}
        alive: dict[str, bool] = {}
        stale = [key for key in keys if key not in taken and not self._live(self._owner_of(key), alive)]
        if stale:
            with FileLock(self.folder / "takeover", wait=True, poll_s=0.02, wait_option=None):
                for key in stale:  # read again under the lock: another process may have taken it meanwhile
                    owner = self._owner_of(key)
                    if not self._live(owner, alive) and self._replace(key, owner):
                        taken.add(key)
        self._mine |= taken
        return taken

    def free(self, keys: list[str]) -> list[str]:
        """Those of `keys` that no live process (this one included) claims now."""
        alive: dict[str, bool] = {}
        return [key for key in keys if key not in self._mine and not self._live(self._owner_of(key), alive)]

    def release(self, keys: list[str]) -> None:
        """Give up this process's claims on `keys` (the others are left alone)."""
        for key in keys:
            if key in self._mine:
                self._mine.discard(key)
                self._path(key).unlink(missing_ok=True)

    def close(self) -> None:
        """Release every claim, then the owner lock."""
        try:
            self.release(list(self._mine))
        finally:
            self._owner_lock.release()

    # -- one claim file ------------------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        name = key if _SAFE_NAME.fullmatch(key) else hashlib.sha256(key.encode()).hexdigest()
        return self.folder / f"{name}.claim"

    def _create(self, key: str) -> bool:
        try:
            fd = os.open(self._path(key), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, self.owner.encode())
        finally:
            os.close(fd)
        return True

    def _replace(self, key: str, old: str | None) -> bool:
        """Take over the claim of a gone owner `old` (under the takeover lock); False if it changed hands."""
        path = self._path(key)
        if not path.exists():
            return self._create(key)
        if self._owner_of(key) != old:
            return False
        tmp = path.with_name(f".{path.name}.{self.owner}")
        tmp.write_text(self.owner)
        os.replace(tmp, path)
        log.debug("%s: took over a claim of %s (that process is gone)", path, old)
        return True

    def _owner_of(self, key: str) -> str | None:
        """The claim's owner; "" while it is being written; None when there is no claim (or an abandoned,
        empty one)."""
        path = self._path(key)
        try:
            owner = path.read_text().strip()
            age = time.time() - path.stat().st_mtime
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return owner or ("" if age < CREATING_GRACE_S else None)  # an empty one may be being written

    def _live(self, owner: str | None, seen: dict[str, bool]) -> bool:
        """Whether a claim by `owner` binds: its owner lock is held by a live process (memoised in `seen`)."""
        if owner is None:
            return False
        if owner in ("", self.owner):
            return True
        if owner not in seen:
            seen[owner] = _owner_alive(self.folder / "owners" / owner)
        return seen[owner]


_SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


def _owner_alive(owner: Path) -> bool:
    """Whether the owner lock at `owner` is held by a live process; a gone holder's is removed (taken and
    given back)."""
    lock = FileLock(owner, wait_option=None)
    if not lock.path.exists():
        return False
    try:
        lock.acquire()
    except RunLocked:
        return True
    lock.release()
    return False


class _Unknown:
    """A holder that has not written itself into the lock file yet."""

    def describe(self) -> str:
        return "a process that is just starting"


UNKNOWN = _Unknown()


def _flock(fd: int, block: bool = False) -> bool | None:
    """Try an exclusive flock: True taken, False held by another, None unsupported on this file system."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if block else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _write_holder(fd: int, holder: Holder) -> None:
    data = json.dumps(asdict(holder), sort_keys=True).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def _read_holder(fd: int) -> Holder | None:
    try:
        raw = os.pread(fd, 1 << 16, 0)
        return Holder(**json.loads(raw))
    except (ValueError, TypeError, OSError):
        return None


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd` (not removed or replaced since)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _command() -> str:
    """The holder's command line (`python -m facet_probe ...`), short, with credentials masked."""
    from facet_probe.core.redact import redact_text

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = f"python -m {spec.name.removesuffix('.__main__')}" if spec else Path(sys.argv[0]).name
    text = redact_text(" ".join([program, *sys.argv[1:]]))
    return text if len(text) <= 300 else text[:297] + "..."
