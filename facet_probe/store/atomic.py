"""Atomic file writes: a result file is either its old complete self or its new complete self, never torn.

Each write goes to a temp file with a unique name in the same folder (so two writers never share one and
`os.replace` stays on one file system), keeping the target's suffix so pandas, matplotlib and PIL pick the
format; the temp file is fsync'd and renamed over the target on success and removed on failure. A temp name
carries its writer (host, pid), so one a killed write left behind is removed by the next write into the
same folder (`remove_stale_temps`), and one a live process is writing never is. A write that finds no room
(a full disk, a quota, a file size limit) is a `WriteFailed` naming the file, not a crash.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from facet_probe.store.locking import pid_alive

log = logging.getLogger(__name__)

#: errnos of a write that found no room: a full disk, a full quota, a file past the process's size limit
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class WriteFailed(Exception):
    """A file could not be written (a full disk, a quota, a file size limit): one line saying what, where, what
    is stored and what to do; the apps show it as a user error (exit code 2)."""


def write_failed(path: str | Path, exc: OSError, stored: str = "") -> WriteFailed:
    """The `WriteFailed` of a write to `path` that `exc` stopped; `stored` says what is kept."""
    fix = ("free space on that disk (or lift the quota or file size limit)" if exc.errno in NO_ROOM
           else "check that disk")
    return WriteFailed(f"cannot write {path}: [Errno {exc.errno}] {exc.strerror or exc}"
                       f"{'; ' + stored if stored else ''}; {fix}, then re-run the same command (what is stored "
                       "is kept and not done again)")


@contextlib.contextmanager
def no_room_fails(path: str | Path) -> Iterator[None]:
    """Within: a write that finds no room raises `WriteFailed` naming `path` (a full disk is not a crash)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in NO_ROOM:
            raise
        raise write_failed(path, exc) from exc


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a unique temp path beside `path`; on success fsync it and rename it over `path`."""
    path = Path(path)
    with no_room_fails(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent)
        tmp = _create_unique(path, lambda p: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)))
        try:
            yield tmp
            _fsync_file(tmp)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically; return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` atomically; return the path."""
    return atomic_write_bytes(path, text.encode(encoding))


@contextlib.contextmanager
def background_writes() -> Iterator[Callable[..., None]]:
    """Yield `submit(fn, *args)`: each write runs on one thread beside the caller's work (Arrow encodes and
    writes Parquet without holding the GIL: a 400k-trial report's trials.parquet costs nothing on a second core).
    Leaving the block waits for every write and raises the first that failed (a failure of the block itself wins)."""
    pending: list[Future] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="facet-probe-write") as pool:
        yield lambda fn, *args: pending.append(pool.submit(fn, *args))
    for write in pending:
        write.result()


@contextlib.contextmanager
def atomic_dir(path: str | Path, ours: Collection[str] = ()) -> Iterator[Path]:
    """Yield a fresh temp folder beside `path`; on success it replaces `path`, a folder this code writes.

    Every file of the old folder that the new one does not hold and that is not one of `ours` (paths relative
    to the folder: the files this code writes there) is someone else's and is carried into the new folder
    (`carry_over`); the old folder is moved aside and deleted after the swap. A kill leaves either the old
    complete folder, the new complete one, or (between the two renames) the old one aside, which the next
    write beside it moves back (`remove_stale_temps`); never a half-written one, and never a file lost that
    this code did not write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent)
    tmp = _create_unique(path, lambda p: p.mkdir(0o777), tag="partial")
    try:
        with no_room_fails(path):
            yield tmp
            for f in tmp.rglob("*"):
                if f.is_file():
                    _fsync_file(f)
            if path.is_dir():
                carry_over(path, tmp, ours)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = _create_unique(path, lambda p: None, tag="old")
        os.replace(path, old)
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def carry_over(old: Path, new: Path, ours: Collection[str] = ()) -> list[str]:
    """Put into `new` every entry of `old` that `new` does not hold and that is not one of `ours` (relative
    paths), as a hard link (a copy where the file system has none), so that it outlives `old`'s deletion;
    returns the relative paths carried. Folders are walked, symlinks carried as links, never followed."""
    carried, walk = [], []  # walk: the folders of `old` whose entries go into a folder of `new`
    for root, dirs, files in os.walk(old):  # top down, never into a symlinked folder
        for name in sorted(dirs + files):
            source = Path(root) / name
            rel = source.relative_to(old)
            target = new / rel
            folder = source.is_dir() and not source.is_symlink()
            if folder and target.is_dir() and not target.is_symlink() and rel.as_posix() not in ours:
                walk.append(name)  # a folder both hold (figures/): its entries are looked at one by one
            elif rel.as_posix() in ours or target.exists() or target.is_symlink():
                continue  # ours, or replaced by a file of the new folder's of the same name
            elif folder:
                target.mkdir()
                walk.append(name)
                carried.append(rel.as_posix())
            else:
                try:
                    os.link(source, target, follow_symlinks=False)
                except OSError:
                    shutil.copy2(source, target, follow_symlinks=False)
                carried.append(rel.as_posix())
        dirs[:] = [d for d in dirs if d in walk and (Path(root) / d).is_dir()]
        walk.clear()
    return carried


def temp_name(path: Path, tag: str = "tmp") -> Path:
    """A hidden, unique sibling of `path` that keeps its suffix and names its writer:
    `.<name>.<host>-<pid>-<random>.<tag><suffix>` (host: a short hash of this machine's name)."""
    return path.with_name(f".{path.name}.{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.{tag}{path.suffix}")


_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
#: a temp of `temp_name` (or of the older `.<name>.<pid>-<random>.<tag><suffix>`, written on this host)
_TEMP = re.compile(r"\.(?P<name>.+)\.(?:(?P<host>[0-9a-f]{8})-)?(?P<pid>\d+)-[0-9a-f]{8}\.(?P<tag>tmp|partial|old)"
                   r"(?:\.[^.]*)?")
_swept: set[tuple[Path, int]] = set()  # (folder, pid): each folder is swept once per process


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove the temps in `folder` that killed writes left behind (written on this host by a process that is
    gone), once per process and folder; a temp of a live process or of another host is left alone. A folder a
    kill left aside (`atomic_dir`, between its renames: `<name>` is missing) is moved back instead."""
    folder = Path(folder).absolute()
    if (folder, os.getpid()) in _swept:
        return []
    removed = []
    with os.scandir(folder) as entries:
        stale = {Path(e.path): m for e in entries if (m := _TEMP.fullmatch(e.name)) and m["host"] in (None, _HOST)
                 and not pid_alive(int(m["pid"]))}
    for temp, match in sorted(stale.items()):
        aside = match["tag"] == "old" and temp.is_dir() and not temp.is_symlink()
        if aside and not (original := folder / match["name"]).exists():
            os.replace(temp, original)  # the old folder, whole, with every file it held
            log.info("%s: moved back %s, which an interrupted write had set aside", folder, original.name)
            continue
        if temp.is_dir() and not temp.is_symlink():
            shutil.rmtree(temp, ignore_errors=True)
        else:
            temp.unlink(missing_ok=True)
        removed.append(temp)
    if removed:
        log.info("%s: removed %d temp file(s) that an interrupted write left behind", folder, len(removed))
    _swept.add((folder, os.getpid()))
    return removed


def _create_unique(path: Path, create, tag: str = "tmp") -> Path:
    """Create (with `create`, which must fail if it exists) a fresh temp sibling of `path`; return it."""
    while True:
        candidate = temp_name(path, tag)
        try:
            create(candidate)
        except FileExistsError:
            continue
        return candidate


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system lets a folder be fsync'd)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
