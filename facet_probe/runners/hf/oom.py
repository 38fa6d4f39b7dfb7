"""Out-of-memory halving: run items in batches, halve a batch that runs out of memory and retry it.

One implementation for the runner's generation and the attack's sample chunks. Usage::

    from facet_probe.runners.hf.oom import BatchLimit, is_oom, run_halving

    limit = BatchLimit(8)                      # kept across calls: once lowered, later batches start lower
    for batch, result in run_halving(items, limit, run=lambda batch: work(batch),
                                     alone=lambda batch, exc: give_up(batch[0], exc),  # optional
                                     isolate_errors=False, label="my-model"):
        ...                                    # `result` is `run(batch)` (or `alone(batch, exc)`)

* a batch whose `run` raises an out-of-memory error (`is_oom`) is split in two halves (the first half
  ceil(n/2) items) that run next, in order, and `limit.size` drops to that half;
* after `limit.grow_after` batches in a row ran at the lowered size without running out of memory, the
  limit doubles again (never above the configured size), so one long prompt does not slow the rest of the
  run; both changes are logged;
* a single item that still runs out of memory goes to `alone(batch, exc)` (its return value is the batch's
  result); without `alone` the error propagates;
* another error propagates, unless `isolate_errors`: then a multi-item batch is retried one item at a time
  (so one bad item does not take its neighbours down) and a single failing item goes to `alone`.

Batches are yielded in item order, each with the items it covered, so callers never lose or reorder an item.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import torch

log = logging.getLogger("facet_probe.runners.hf")

T = TypeVar("T")
R = TypeVar("R")


def is_oom(exc: BaseException) -> bool:
    """A CUDA (or other backend's) out-of-memory error, recognised by type or by message."""
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


@dataclass
class BatchLimit:
    """The largest batch to try (shared by successive calls): halved by out-of-memory, doubled back towards
    the configured size after `grow_after` batches in a row that ran at the lowered size."""

    size: int
    grow_after: int = 16
    ceiling: int = field(init=False)  # the configured size: never grown past
    _fitted: int = field(init=False, default=0)  # batches in a row at the current (lowered) size that ran

    def __post_init__(self) -> None:
        if int(self.size) < 1:
            raise ValueError("batch size must be >= 1")
        if int(self.grow_after) < 1:
            raise ValueError("grow_after must be >= 1")
        self.size = self.ceiling = int(self.size)
        self.grow_after = int(self.grow_after)

    def halve(self, width: int) -> int:
        """Lower the limit to half of a `width`-item batch that ran out of memory; the new limit."""
        self.size = max(1, min(self.size, (width + 1) // 2))
        self._fitted = 0
        return self.size

    def fitted(self, width: int) -> bool:
        """Count a `width`-item batch that ran; True when that raised the limit (doubled, at most the ceiling)."""
        if width < self.size or self.size >= self.ceiling:
            return False
        self._fitted += 1
        if self._fitted < self.grow_after:
            return False
        self.size, self._fitted = min(self.ceiling, 2 * self.size), 0
        return True


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """`items` in consecutive lists of at most `size`."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def run_halving(items: Sequence[T], limit: BatchLimit, run: Callable[[list[T]], R], *,
                alone: Callable[[list[T], BaseException], R] | None = None, isolate_errors: bool = False,
                label: str = "") -> Iterator[tuple[list[T], R]]:
    """Yield `(batch, run(batch))` over `items` in batches of `limit.size`, halving on out of memory and
    growing back (the module docstring gives the rules)."""
    pending: deque[T] = deque(items)  # not tried yet: taken `limit.size` at a time, so a raised limit applies
    retry: deque[list[T]] = deque()  # parts of a batch that failed, run as they are before anything pending
    while retry or pending:
        batch = retry.popleft() if retry else [pending.popleft() for _ in range(min(limit.size, len(pending)))]
        if len(batch) > limit.size:  # an earlier out-of-memory lowered the limit
            retry.extendleft(reversed(chunks(batch, limit.size)))
            continue
        try:
            result = run(batch)
        except Exception as exc:
            oom = is_oom(exc)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if len(batch) > 1 and oom:
                half = limit.halve(len(batch))
                log.warning("%s: out of memory at batch size %d; retrying at %d", label, len(batch), half)
                retry.extendleft(reversed(chunks(batch, half)))
                continue
            if len(batch) > 1 and isolate_errors:
                retry.extendleft(reversed(chunks(batch, 1)))
                continue
            if alone is None or not (oom or isolate_errors):
                raise
            result = alone(batch, exc)
        else:
            if limit.fitted(len(batch)):
                log.info("%s: %d batches in a row fitted in memory; batch size back up to %d (configured %d)",
                         label, limit.grow_after, limit.size, limit.ceiling)
        yield batch, result
