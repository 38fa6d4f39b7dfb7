"""Atomic file writes: a result file is either its old complete self or its new complete self, never torn.

Each write goes to a temp file with a unique name in the same folder (so two writers never share one and
`os.replace` stays on one file system), keeping the target's suffix so pandas, matplotlib and PIL pick the
format; the temp file is fsync'd and renamed over the target on success and removed on failure.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a unique temp path beside `path`; on success fsync it and rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temp folder beside `path`; on success it replaces `path` (a folder this code owns whole).

    The old folder is moved aside and deleted after the swap, so a kill leaves either the old complete
    folder, the new complete one, or (between the two renames) none, and never a half-written one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_unique(path, lambda p: p.mkdir(0o777), tag="partial")
    try:
        yield tmp
        for f in tmp.rglob("*"):
            if f.is_file():
                _fsync_file(f)
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


def temp_name(path: Path, tag: str = "tmp") -> Path:
    """A hidden, unique sibling of `path` that keeps its suffix: `.<name>.<pid>-<random>.<tag><suffix>`."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.{tag}{path.suffix}")


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
