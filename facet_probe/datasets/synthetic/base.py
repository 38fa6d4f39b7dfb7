"""The shared machinery of the synthetic sets: seeded streams, test/train separation, versioning.

Each set draws an abstract `Draft` (its content as plain data) from a per-index RNG and turns it
into an `Item`. Item i depends only on (set, split, seed, i), so samples are prefix-stable and any
index is reproducible on its own. The `train` split uses its own RNG stream and additionally drops
every draft whose content equals one of the first `holdout_n` test items of the same seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from facet_probe.core.items import Component, ComponentKind, ImageRef, Item, make_item
from facet_probe.datasets.base import DatasetLoader

#: Version of every synthetic generator. Bump it whenever any generated item could change
#: (vocabulary, templates, drawing, sampling); models trained on the sets record it.
GENERATOR_VERSION = "1.0"

SPLITS = ("test", "train")
N_CHOICES = 4
#: (loader class, seed, holdout_n) -> the holdout's content signatures, once per process: a set's `draw` reads only
#: its rng, so every loader of one class and seed excludes the same content (each train load drew 5000 test items)
_HOLDOUTS: dict[tuple[type, int, int], frozenset[str]] = {}


@dataclass(frozen=True)
class Draft:
    """A drawn item before rendering: `content` is what makes it the same question (compared
    across splits, order-insensitively); `task` names its template."""

    task: str
    content: dict[str, Any]
    layout: dict[str, Any] = field(default_factory=dict)


def stream_rng(set_name: str, split: str, seed: int, index: int) -> random.Random:
    """The RNG of draw `index` of one set's split: independent of every other index and split."""
    key = f"{set_name}\x1f{split}\x1f{seed}\x1f{index}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def _canonical(value: Any) -> Any:
    """Lists become order-free (sorted), dicts key-sorted: same content, same canonical form."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple | set | frozenset):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def content_signature(content: dict[str, Any]) -> str:
    """SHA-256 of the order-insensitive content: equal for the same question and evidence."""
    canon = json.dumps(_canonical(content), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def mcq_choices(rng: random.Random, gold: str, lures: Sequence[str], pool: Sequence[str],
                k: int = N_CHOICES) -> tuple[tuple[str, ...], int]:
    """k distinct options: the gold, then lures (up to k-1), filled from the pool; shuffled, so the
    gold position is uniform. Returns (choices, gold_index)."""
    picked = [gold]
    for word in [*lures, *rng.sample(list(pool), len(pool))]:
        if len(picked) == k:
            break
        if word not in picked:
            picked.append(word)
    if len(picked) < k:
        raise ValueError(f"cannot draw {k} distinct options for gold {gold!r} from a pool of {len(pool)}")
    rng.shuffle(picked)
    return tuple(picked), picked.index(gold)


def image_component(cid: str, png: bytes, **metadata: Any) -> Component:
    return Component(id=cid, kind=ComponentKind.IMAGE, image=ImageRef.from_bytes(png), metadata=metadata)


class SyntheticLoader(DatasetLoader):
    """Base of the generated sets: `draw` a draft from an RNG, `build` it into an item."""

    source: ClassVar[str] = "generated offline by facet_probe.datasets.synthetic (no download)"
    license: ClassVar[str] = "CC0-1.0 (generated content)"
    #: Identity of the RNG stream (independent of the config name, so renaming keeps the items).
    set_name: ClassVar[str]
    #: How many draws per requested item before giving up (the content space is finite).
    max_draws_per_item: ClassVar[int] = 50
    n: int  # required: __init__ refuses None

    def __init__(self, name: str, path: str | None = None, n: int = 200, seed: int = 42,
                 split: str = "test", image_size: int = 64, holdout_n: int = 5000, **options) -> None:
        super().__init__(name, path, n, seed, **options)
        if path:
            raise ValueError(f"dataset {name}: synthetic sets are generated, not read; "
                             f"leave dataset.path null (got {path!r})")
        if split not in SPLITS:
            raise ValueError(f"dataset {name}: split must be one of {SPLITS}, got {split!r}")
        if n is None or n < 0:
            raise ValueError(f"dataset {name}: n must be a non-negative number of items, got {n!r}")
        if image_size < 16:
            raise ValueError(f"dataset {name}: image_size must be at least 16 pixels, got {image_size}")
        self.split = split
        self.image_size = image_size
        self.holdout_n = holdout_n

    @abstractmethod
    def draw(self, rng: random.Random) -> Draft:
        """Draw one item's content (cheap: no images)."""

    @abstractmethod
    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        """Render the draft as an item (`meta` goes into `item.metadata`)."""

    def drafts(self, count: int) -> Iterator[Draft]:
        """The first `count` drafts of this split (test: distinct; train: none equal to a test one)."""
        return self._stream(self.split, count)

    def _stream(self, split: str, count: int) -> Iterator[Draft]:
        excluded = self.holdout_signatures() if split == "train" else frozenset()
        seen: set[str] = set()
        produced = draws = 0
        budget = self.max_draws_per_item * count + 100
        while produced < count:
            if draws >= budget:
                raise RuntimeError(f"{self.name}: drew {draws} candidates for {count} distinct items of the "
                                   f"{split} split; the content space is too small for this n")
            draft = self.draw(stream_rng(self.set_name, split, self.seed, draws))
            draws += 1
            sig = content_signature(draft.content)
            if sig in excluded or (split == "test" and sig in seen):
                continue
            seen.add(sig)
            produced += 1
            yield draft

    def holdout_signatures(self) -> frozenset[str]:
        """Content signatures of the first `holdout_n` test items (same seed): never used in train."""
        key = (type(self), self.seed, self.holdout_n)
        if key not in _HOLDOUTS:
            _HOLDOUTS[key] = frozenset(content_signature(d.content) for d in self._stream("test", self.holdout_n))
        return _HOLDOUTS[key]

    def load_all(self) -> list[Item]:
        return self._generate(self.n)

    def load(self, limit: int | None = None) -> list[Item]:
        """The first n items (or the first `limit` of them): prefix-stable by construction."""
        return self._generate(self.n if limit is None else min(self.n, limit))

    def _generate(self, count: int) -> list[Item]:
        items = []
        for i, draft in enumerate(self.drafts(count)):
            meta = {"generator_version": GENERATOR_VERSION, "split": self.split, "seed": self.seed,
                    "index": i, "task": draft.task}
            items.append(self.build(draft, f"{self.name}::{self.split}-{i:05d}", meta))
        return items

    def make(self, **fields: Any) -> Item:
        """`make_item` with this set's dataset name filled in."""
        return make_item(dataset=self.name, **fields)
