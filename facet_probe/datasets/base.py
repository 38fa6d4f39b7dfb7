"""The dataset loader contract: upstream rows (hub or local copy) -> canonical items.

Each dataset is one small module with a `DatasetLoader` subclass, registered by a config in
`conf/dataset/<name>.yaml` (`_target_` = the class). Sampling is deterministic and prefix-stable:
the first 50 items of an n=200 sample are the n=50 sample.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from facet_probe.items import Item, check_unique_ids


class DatasetUnavailable(FileNotFoundError):
    """The data is not on disk (and cannot be fetched): the message says what to fetch and where."""


class DatasetLoader(ABC):
    """Loads one dataset as items for the facets it supports."""

    #: Facets this dataset's items can be audited under (checked before any model call).
    facets: ClassVar[tuple[str, ...]]
    #: Upstream source (hub id or URL) and licence, shown in docs and errors.
    source: ClassVar[str] = ""
    license: ClassVar[str] = ""
    #: Folder name under `data_root` holding the local copy (None: the dataset's config name).
    data_folder: ClassVar[str | None] = None

    def __init__(self, name: str, path: str | None = None, n: int | None = None, seed: int = 42,
                 **options) -> None:
        self.name = name
        self.path = Path(path).expanduser() if path else None
        self.n = n
        self.seed = seed
        if options:
            raise TypeError(f"dataset {name}: unknown option(s) {sorted(options)}")

    @abstractmethod
    def load_all(self) -> list[Item]:
        """Every eligible item (after the dataset's filter), in upstream order."""

    def load(self, limit: int | None = None) -> list[Item]:
        """The deterministic sample of `n` items (then the first `limit` of it)."""
        items = self.load_all()
        check_unique_ids(items)
        items = stable_sample(items, self.n, self.seed)
        return items[:limit] if limit is not None else items


def stable_sample(items: Sequence[Item], n: int | None, seed: int) -> list[Item]:
    """Order items by a seeded hash of their id and take the first n: prefix-stable, whole-split.

    A hash order (not `random.sample`) makes the n=50 sample the first 50 of the n=200 sample and
    keeps an item's rank independent of which other items exist.
    """
    def rank(item: Item) -> str:
        return hashlib.sha256(f"{seed}\x1f{item.item_id}".encode()).hexdigest()

    ordered = sorted(items, key=rank)
    return list(ordered if n is None else ordered[:n])
