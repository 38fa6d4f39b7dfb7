"""The reference runner's item selection (yahskapar/facet-probe `paper_loaders.py`), as a switch beside ours.

`dataset.sampling=stable` (default) ranks every eligible row by a seeded hash of its id (prefix-stable,
whole-split). `dataset.sampling=reference` draws as the reference runner does, with the multipliers and
seeds it hard-codes per dataset (each loader's `reference` spec), and names items as it does
(`<reference dataset name>::<raw id>`), so the same upstream files give the same items, ids and orderings.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")
V = TypeVar("V")


class Sampling(StrEnum):
    """How a loader picks its `n` items."""

    STABLE = "stable"  #: ours: seeded hash order over every eligible row (n=50 is the prefix of n=200)
    REFERENCE = "reference"  #: the reference runner's draw, multipliers, seeds and item ids


class Draw(StrEnum):
    """The three draws `paper_loaders.py` uses."""

    BUFFER = "buffer"  #: the first target x multiplier rows (admitted ones), shuffled, then filtered
    ELIGIBLE = "eligible"  #: every eligible row, shuffled
    UPSTREAM = "upstream"  #: eligible rows in upstream order, no shuffle (MathVision)


class RawId(StrEnum):
    """What follows `<name>::` in the reference's item id."""

    FIELD = "field"  #: the first of `id_fields` the row has, else the number of items taken so far
    BUFFER_INDEX = "buffer_index"  #: the row's index in the shuffled buffer, 4 digits (MultiHop-RAG)


@dataclass(frozen=True)
class ReferenceSelection:
    """One dataset's selection in the reference runner: its name there, the draw, seed and multiplier."""

    name: str  #: the reference's dataset name (item ids are `<name>::<raw id>`)
    draw: Draw
    default_target: int  #: `n = target or <this>` in the reference loader
    seed: int = 42
    multiplier: int = 1  #: BUFFER: rows read = target x multiplier
    id_fields: tuple[str, ...] = ("id",)
    raw_id: RawId = RawId.FIELD

    def item_id(self, row: Mapping[str, Any], buffer_index: int, taken: int) -> str:
        """The reference's id for a row (`taken`: items selected before it, its fallback raw id)."""
        if self.raw_id is RawId.BUFFER_INDEX:
            return f"{self.name}::{buffer_index:04d}"
        raw = next((row[k] for k in self.id_fields if k in row), taken)
        return f"{self.name}::{raw}"


def shuffled(values: Iterable[T], seed: int) -> list[T]:
    """`random.Random(seed).shuffle` of the values, as the reference shuffles."""
    out = list(values)
    random.Random(seed).shuffle(out)
    return out


def buffer(rows: Iterable[T], size: int, admit: Callable[[T], bool] = lambda row: True) -> list[T]:
    """The first `size` admitted rows (the reference's `_shuffled_buffer` before the shuffle)."""
    out: list[T] = []
    for row in rows:
        if admit(row):
            out.append(row)
            if len(out) >= size:
                break
    return out


def take_passing(rows: Iterable[T], passes: Callable[[T], V | None], target: int) -> list[tuple[int, V]]:
    """(index in `rows`, passes(row)) for the first `target` rows that pass (passes returns None to skip)."""
    out: list[tuple[int, V]] = []
    for index, row in enumerate(rows):
        value = passes(row)
        if value is not None:
            out.append((index, value))
            if len(out) >= target:
                break
    return out


def reference_select(
    spec: ReferenceSelection,
    target: int | None,
    rows: Callable[[], Iterable[T]],
    passes: Callable[[T], V | None],
    admit: Callable[[T], bool] = lambda row: True,
    after: Callable[[V], V | None] = lambda value: value,
) -> list[tuple[int, V]]:
    """The reference's selection: (index in what was filtered, candidate) for up to `target` items.

    BUFFER reads the first target x multiplier admitted rows, shuffles them with the seed and keeps the
    first `target` that pass; ELIGIBLE shuffles every passing row; UPSTREAM keeps the first that pass.
    ELIGIBLE and UPSTREAM then keep the first `target` that `after` keeps (what the reference drops only
    after its shuffle, e.g. a row whose images are not in the archive).
    """
    target = target or spec.default_target
    if spec.draw is Draw.BUFFER:
        return take_passing(shuffled(buffer(rows(), target * spec.multiplier, admit), spec.seed), passes, target)
    passing = [value for value in map(passes, rows()) if value is not None]
    if spec.draw is Draw.ELIGIBLE:
        passing = shuffled(passing, spec.seed)
    return take_passing(passing, after, target)


def parse_sampling(value: Any, dataset: str) -> Sampling:
    """The `sampling` setting as a Sampling; a clear message naming the valid values otherwise."""
    try:
        return Sampling(str(value))
    except ValueError:
        from facet_probe.core.errors import ConfigError

        raise ConfigError(f"dataset {dataset}: sampling={value!r} is not a sampling mode; valid: "
                          f"{', '.join(s.value for s in Sampling)}") from None
