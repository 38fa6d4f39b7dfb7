"""Which prompt prefix the requests of a batch share, and the inputs that prefill them once (pure, no model).

The rows are compared by their tokens with each image token named after its image (`content_ids`), grouped so
that the prefill computes the fewest token positions, padding included (`plan_prefixes`), and laid out for one
forward over the distinct prefixes (`collate_prefixes`) and for `generate` going on from their cache
(`collate_after_prefixes`). prefix_reuse.py runs them on the model.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from facet_probe.runners.hf.encoded import Encoded, lay_out


class ImageNames:
    """Names for image tokens, shared by the rows compared: the same image gets the same names in every row."""

    def __init__(self) -> None:
        self._first: dict[Hashable, int] = {}
        self._next = 0

    def of(self, key: Hashable, j: int, count: int) -> int:
        """The name of token `j` of the image `key` (of `count` tokens): -1 - first - j, negative so it is never a
        vocabulary id, and consecutive within an image."""
        if key not in self._first:
            self._first[key], self._next = self._next, self._next + max(count, 1)
        return -1 - self._first[key] - j


def content_ids(ids: Sequence[int], image_token: int | None, images: Sequence[tuple[Hashable, int]],
                names: ImageNames) -> list[int]:
    """The token ids with each image token named after its image and its place in it (`names`), so that rows
    compare equal only where they show the same images. `images`: each image's key and token count, in display
    order; an image whose count is unknown gets a name of its own."""
    slots = iter([(key, j, count) for key, count in images for j in range(count)])
    out: list[int] = []
    for t in ids:
        if image_token is None or t != image_token:
            out.append(int(t))
        else:
            key, j, count = next(slots, (object(), 0, 1))
            out.append(names.of(key, j, count))
    return out


def image_starts(row: Sequence[int], end: int | None = None) -> int:
    """How many images begin within `row[:end]` (`content_ids`' image tokens)."""
    stop = len(row) if end is None else end
    return sum(1 for j in range(stop) if row[j] < 0 and not (j and row[j - 1] == row[j] + 1))


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of `a` and `b`."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class SortedRows:
    """Rows sorted by their tokens, so that each sits next to those it shares the most with, and what each pair of
    neighbours shares (at most either's `limits` entry)."""

    def __init__(self, contents: Sequence[Sequence[int]], limits: Sequence[int]) -> None:
        self.order = sorted(range(len(contents)), key=lambda i: list(contents[i]))
        self.shared = [min(common_length(contents[x], contents[y]), limits[x], limits[y])
                       for x, y in zip(self.order, self.order[1:], strict=False)]

    def group(self, lo: int, hi: int) -> tuple[list[int], int]:
        """The sorted rows lo..hi (inclusive) and the prefix they all share (0 for one row)."""
        return self.order[lo:hi + 1], min(self.shared[lo:hi], default=0)

    def weakest(self, lo: int, hi: int) -> int:
        """Where the rows lo..hi split: after the neighbour pair that shares the least."""
        return min(range(lo, hi), key=self.shared.__getitem__)


def prefill_cost(sizes: Sequence[int], lengths: Sequence[int], prefixes: int) -> int:
    """The token positions a batch's prefill computes (padding included) when its rows (`sizes` tokens each) take
    `lengths` tokens from `prefixes` distinct prefixes: the prefixes padded to the longest, then every row's rest
    padded to the longest rest."""
    return prefixes * max(lengths) + len(sizes) * max(size - n for size, n in zip(sizes, lengths, strict=True))


def batch_groups(contents: Sequence[Sequence[int]], limits: Sequence[int]) -> list[tuple[list[int], int]]:
    """The prefix groups that make a batch's prefill cheapest (`prefill_cost`): from one group for the whole batch
    (the prefix all its rows share), a group is split in two while some split lowers the cost."""
    rows = SortedRows(contents, limits)
    sizes = [len(c) for c in contents]
    spans = [(0, len(rows.order) - 1)]

    def cost(candidate: list[tuple[int, int]]) -> int:
        lengths = [0] * len(sizes)
        groups = [rows.group(lo, hi) for lo, hi in candidate]
        for members, n in groups:
            for i in members:
                lengths[i] = n
        return prefill_cost(sizes, lengths, sum(1 for _, n in groups if n))

    while True:
        options = []
        for k, (lo, hi) in enumerate(spans):
            if lo < hi:
                cut = rows.weakest(lo, hi)
                options.append(spans[:k] + [(lo, cut), (cut + 1, hi)] + spans[k + 1:])
        best = min(options, key=cost, default=None)
        if best is None or cost(best) >= cost(spans):
            return [rows.group(lo, hi) for lo, hi in spans]
        spans = best


@dataclass(frozen=True)
class PrefixPlan:
    """Which prefix each row of a batch takes from the cache."""

    lengths: list[int]  # per row: its prefix's tokens (0: none, its whole prompt is prefilled)
    prefix_of: list[int]  # per row: the index of its prefix in `sources` (any, where its length is 0)
    sources: list[int]  # per distinct prefix: a row that holds it (its first `lengths` tokens)
    images: list[int]  # per row: how many of its images (from the first) lie inside its prefix

    @property
    def width(self) -> int:
        return max(self.lengths)

    def tokens_saved(self, sizes: Sequence[int]) -> int:
        """The prefill's token positions saved (padding included) against the whole prompts left-padded (`sizes`:
        their lengths): the prefixes' own forward counted, each prefix padded to the longest."""
        return len(sizes) * max(sizes) - prefill_cost(sizes, self.lengths, len(self.sources))


def plan_prefixes(contents: Sequence[Sequence[int]], limits: Sequence[int]) -> PrefixPlan | None:
    """The shared prefixes of a batch (`contents`: each row's `content_ids`) and where each row takes its own;
    None where no two rows share one."""
    lengths, prefix_of = [0] * len(contents), [0] * len(contents)
    sources: list[int] = []
    for rows, n in sorted(batch_groups(contents, limits), key=lambda g: min(g[0])):
        if n:
            for i in rows:
                lengths[i], prefix_of[i] = n, len(sources)
            sources.append(min(rows))
    images = [image_starts(row, n) for row, n in zip(contents, lengths, strict=True)]
    return PrefixPlan(lengths, prefix_of, sources, images) if sources else None


def prefix_limits(contents: Sequence[Sequence[int]], images_allowed: bool) -> list[int]:
    """How far each row's prefix may reach: one token short of the whole prompt, never inside an image (an image's
    tokens stay together), and before the first image when images cannot be prefilled."""
    limits = []
    for row in contents:
        limit = len(row) - 1
        first_image = next((j for j, t in enumerate(row) if t < 0), None)
        if first_image is not None and not images_allowed:
            limit = min(limit, first_image)
        while 0 < limit < len(row) and row[limit] < 0 and row[limit - 1] == row[limit] + 1:
            limit -= 1  # inside an image: back to its first token
        limits.append(limit)
    return limits


def collate_prefixes(rows: Sequence[Encoded], plan: PrefixPlan, pad_id: int) -> dict[str, torch.Tensor]:
    """The distinct prefixes, right-padded: what the prefixes' forward takes."""
    return lay_out([[(rows[s], slice(0, plan.lengths[s]), slice(0, plan.lengths[s]))] for s in plan.sources],
                   plan.width, pad_id)


def collate_after_prefixes(rows: Sequence[Encoded], plan: PrefixPlan, pad_id: int) -> dict[str, torch.Tensor]:
    """Each row as its prefix (left-aligned in the cache's width) then its rest (right-aligned), the padding
    between them masked: what `generate` takes with the gathered cache."""
    width = plan.width + max(len(e) - n for e, n in zip(rows, plan.lengths, strict=True))
    return lay_out([[(e, slice(0, n), slice(0, n)), (e, slice(width - (len(e) - n), width), slice(n, len(e)))]
                    for e, n in zip(rows, plan.lengths, strict=True)], width, pad_id)


@dataclass
class Prefilled:
    """A batch's shared prefixes, prefilled: its plan and the cache, gathered to one row per request."""

    plan: PrefixPlan
    cache: Any  # transformers' cache, gathered per row


