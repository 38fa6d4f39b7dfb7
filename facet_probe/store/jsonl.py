"""Append-only JSONL files (trials, call cache, judgments, attack results): durable appends, torn-tail repair.

A record is one line written with a single write, flushed and fsync'd before the append returns, so a
kill loses at most the line being written. Before a file is appended to again, `repair_torn_tail` cuts
off an unterminated last line (keeping it in `<file>.torn`), so the next record never glues onto it. A write
that fails (a full disk) is cut back to the last whole line and raised as `store.atomic.WriteFailed` (`append_whole`).
Reading is `iter_records` (re-exported from `trial_io`), which skips such a tail.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TextIO

from facet_probe.store.atomic import write_failed
from facet_probe.store.reading import iter_records

__all__ = ["append_line", "append_record", "append_whole", "count_lines", "dumps", "iter_records", "repair_torn_tail"]

log = logging.getLogger(__name__)


def dumps(record: Mapping[str, Any]) -> str:
    """The one line a record is stored as (sorted keys, UTF-8 kept readable)."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


def append_record(target: TextIO | str | Path, record: Mapping[str, Any]) -> None:
    """Append `record` as one JSON line to an open text file or a path, durably (flush + fsync)."""
    append_line(target, dumps(record))


def append_line(target: TextIO | str | Path, line: str) -> None:
    """Append one already-serialised line (no newline inside) durably to an open text file or a path."""
    if isinstance(target, str | Path):
        with open(target, "a", encoding="utf-8") as fh:
            append_line(fh, line)
        return
    fd = target.fileno()
    with _exclusive(fd):  # a repair by another process never cuts a line being written
        target.flush()
        _, _, error = append_whole(fd, [(line + "\n").encode(target.encoding or "utf-8")])
    if error is not None:
        raise write_failed(target.name, error, "the records before this one are stored in it") from error


def append_whole(fd: int, lines: Sequence[bytes]) -> tuple[int, int, OSError | None]:
    """Append `lines` (each ending in a newline) at the end of `fd` and fsync them, under the caller's lock:
    (offset of the first, how many are whole on disk, the error that stopped the rest or None). A write that
    fails part way (a full disk) is cut back to the last whole line, so the file never keeps a torn one."""
    offset = os.fstat(fd).st_size
    data = memoryview(b"".join(lines))
    done = 0
    try:
        while done < len(data):
            done += os.write(fd, data[done:])
        os.fsync(fd)
    except OSError as exc:
        whole, end = 0, 0
        while whole < len(lines) and end + len(lines[whole]) <= done:
            end += len(lines[whole])
            whole += 1
        if end < done:
            os.ftruncate(fd, offset + end)
        return offset, whole, exc
    return offset, len(lines), None


def count_lines(path: Path) -> int:
    """How many lines `path` holds (read in blocks: for a message, never for reading the records)."""
    with Path(path).open("rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))


def repair_torn_tail(path: str | Path) -> int:
    """Cut an unterminated last line off `path` (saving it to `<path>.torn`); return bytes removed."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as fh, _exclusive(fh.fileno()):
        size = os.fstat(fh.fileno()).st_size
        cut = _after_last_newline(fh, size)
        if cut == size:
            return 0
        fh.seek(cut)
        torn = fh.read()
        with path.with_name(path.name + ".torn").open("ab") as aside:
            aside.write(torn + b"\n")
        fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("%s: removed a torn last line (%d bytes) left by an interrupted run; kept in %s.torn",
                path, len(torn), path.name)
    return len(torn)


def _after_last_newline(fh: IO[bytes], size: int) -> int:
    """The offset just after the file's last newline (0 if none; `size` if the file ends with one)."""
    block = 1 << 16
    pos = size
    while pos > 0:
        start = max(0, pos - block)
        fh.seek(start)
        idx = fh.read(pos - start).rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


@contextlib.contextmanager
def _exclusive(fd: int) -> Iterator[None]:
    """An advisory flock for the duration (a no-op where the file system does not support it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)

