"""The dataset loader contract: upstream rows (hub or local copy) -> canonical items.

Each dataset is one small module with a `DatasetLoader` subclass, registered by a config in
`conf/dataset/<name>.yaml` (`_target_` = the class; `conf/dataset/_base.yaml` holds the keys every
loader takes). Sampling is deterministic and prefix-stable by default: the first 50 items of an n=200
sample are the n=50 sample; `sampling: reference` draws as the reference runner does (reference_sampling.py).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

from facet_probe.core.errors import DatasetUnavailable
from facet_probe.core.items import Item, check_unique_ids
from facet_probe.datasets.reference_sampling import ReferenceSelection, Sampling, parse_sampling


class DatasetShortfall(DatasetUnavailable):
    """Fewer eligible items than asked (`n`, or `limit`): the message names both counts and the filter."""


class DatasetLoader(ABC):
    """Loads one dataset as items for the facets it supports."""

    #: Facets this dataset's items can be audited under (checked before any model call).
    facets: ClassVar[tuple[str, ...]]
    #: Upstream source (hub id or URL) and licence, shown in docs and errors.
    source: ClassVar[str] = ""
    license: ClassVar[str] = ""
    #: Folder name under `data_root` holding the local copy (None: the dataset's config name).
    data_folder: ClassVar[str | None] = None
    #: How the reference runner selects and names this dataset's items (None: it has no such dataset).
    reference: ClassVar[ReferenceSelection | None] = None

    def __init__(self, name: str, path: str | None = None, n: int | None = None, seed: int = 42,
                 allow_partial: bool = False, sampling: Sampling | str = Sampling.STABLE, **options) -> None:
        self.name = name
        self.path = Path(path).expanduser() if path else None
        self.n = n
        self.seed = seed
        #: audit what there is when fewer items pass the filter than asked (the run records the shortfall)
        self.allow_partial = bool(allow_partial)
        #: stable (ours, prefix-stable) or reference (the reference runner's draw and ids)
        self.sampling = parse_sampling(sampling, name)
        self._skipped: Counter[str] = Counter()  # rows the loader could not make into items, by reason
        if options:
            raise TypeError(f"dataset {name}: unknown option(s) {sorted(options)}")
        if self.sampling is Sampling.REFERENCE and self.reference is None:
            from facet_probe.core.errors import ConfigError

            raise ConfigError(f"dataset {name}: sampling=reference needs the reference runner's selection, and "
                              "the reference has no such dataset; use dataset.sampling=stable")

    @abstractmethod
    def load_all(self) -> list[Item]:
        """Every eligible item (after the dataset's filter), in upstream order."""

    def load(self, limit: int | None = None) -> list[Item]:
        """The deterministic sample of `n` items (then the first `limit` of it)."""
        items = self.load_all()
        check_unique_ids(items)
        items = stable_sample(items, self.n, self.seed)
        return items[:limit] if limit is not None else items

    def facet_problem(self, facet: str, kinds: Sequence[str]) -> str | None:
        """Why this dataset cannot give the facet (its name, the component kinds it orders) anything to order, when
        that is known before the data is read (a column mapping that maps none of those kinds), else None; loaded
        items are checked one by one."""
        return None

    def eligible(self) -> str:
        """What passes this dataset's filter, in words (the loader's own description)."""
        return (type(self).__doc__ or "rows that pass the loader's filter").strip().splitlines()[0]

    @property
    def as_reference(self) -> bool:
        """Whether items are drawn and built as the reference runner's (`sampling: reference`)."""
        return self.sampling is Sampling.REFERENCE

    def skip(self, reason: str | None) -> bool:
        """Count a row left out because it cannot become a valid item (`reason`, None: it can); True when
        left out. Such a row is filtered, never an error: the run's data summary names the counts."""
        if reason is not None:
            self._skipped[reason] += 1
        return reason is not None

    @property
    def skipped(self) -> dict[str, int]:
        """{reason: rows} left out of the last load as unusable (run_status.json `cells[].skipped_rows`)."""
        return dict(sorted(self._skipped.items()))

    def first_of_each_id(self) -> Callable[[str], bool]:
        """A check `keep(item_id)`: True for an id's first row; a repeat is skipped and counted (ids key trials)."""
        seen: set[str] = set()

        def keep(item_id: str) -> bool:
            if self.skip(REPEATED_ID if item_id in seen else None):
                return False
            seen.add(item_id)
            return True

        return keep


#: The skip reason of a row whose item id an earlier row already has.
REPEATED_ID = "repeats an earlier row's id (the first kept)"


def skipped_line(dataset: str, skipped: dict[str, int]) -> str:
    """A dataset's rows left out as unusable, in words (the audit's log, report.md's provenance), e.g.
    "mmlu_pro: 3 rows skipped (2 x the question is empty; 1 x repeats an earlier row's id (the first kept))"."""
    total = sum(skipped.values())
    reasons = "; ".join(f"{n} x {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{dataset}: {total} row{'' if total == 1 else 's'} skipped ({reasons})"


def asked(n: int | None, limit: int | None) -> int | None:
    """How many items a run asks of a dataset: `n`, cut to `limit`; None for every item."""
    given = [x for x in (n, limit) if x is not None]
    return min(given) if given else None


def check_shortfall(loader: DatasetLoader, items: Sequence[Item], limit: int | None) -> dict | None:
    """{asked, found} when fewer items came than asked; raises DatasetShortfall unless `allow_partial`."""
    want = asked(loader.n, limit)
    if want is None or len(items) >= want:
        return None
    if not loader.allow_partial:
        raise DatasetShortfall(
            f"dataset {loader.name}: {len(items)} items pass its filter ({loader.eligible()}), but {want} are "
            f"asked; is the local copy complete? Set dataset.n={len(items)} to ask for what there is, or "
            "dataset.allow_partial=true to audit them and record the shortfall")
    return {"asked": want, "found": len(items)}


class HasItemId(Protocol):
    """An item, or what becomes one (an upstream loader's candidate row)."""

    @property
    def item_id(self) -> str: ...


Identified = TypeVar("Identified", bound=HasItemId)


def stable_sample(items: Sequence[Identified], n: int | None, seed: int) -> list[Identified]:
    """Order items (or candidates for items) by a seeded hash of their id and take the first n: prefix-stable,
    whole-split.

    A hash order (not `random.sample`) makes the n=50 sample the first 50 of the n=200 sample and
    keeps an item's rank independent of which other items exist.
    """
    def rank(item: Identified) -> str:
        return hashlib.sha256(f"{seed}\x1f{item.item_id}".encode()).hexdigest()

    ordered = sorted(items, key=rank)
    return list(ordered if n is None else ordered[:n])
