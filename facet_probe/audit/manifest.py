"""Manifests: the K orderings (x R repeats) per (item, facet), drawn once and saved before any call.

A saved manifest is replayed exactly for every model, so all models see the same orderings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from facet_probe.config.schema import MAX_MANIFEST_ROWS
from facet_probe.core.errors import ConfigError
from facet_probe.core.items import Item
from facet_probe.core.permutations import (
    ENUMERATE_UP_TO,
    distinct_orderings,
    is_permutation,
    max_k,
    sample_permutations,
)
from facet_probe.facets.base import Facet
from facet_probe.store.atomic import atomic_path


@dataclass(frozen=True)
class ManifestRow:
    facet: str
    dataset: str
    item_id: str
    ordering_idx: int
    repeat_idx: int
    permutation: tuple[int, ...]
    component_ids: tuple[str, ...]  # source component ids in display order
    seed: int
    k: int


def build_manifest(items: Iterable[Item], facet: Facet, k: int = 6, seed: int = 42,
                   repeats: int = 1) -> list[ManifestRow]:
    """K orderings per item (identity first), each repeated `repeats` times for the control."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rows: list[ManifestRow] = []
    for item in items:
        facet.check(item)
        comps = facet.orderables(item)
        for o, perm in enumerate(sample_permutations(len(comps), k=k, seed=seed, item_id=item.item_id)):
            ids = tuple(comps[i].id for i in perm)
            for r in range(repeats):
                rows.append(ManifestRow(facet.name, item.dataset, item.item_id, o, r, perm, ids, seed, k))
    return rows


def check_manifest_size(cells: Sequence[tuple[str, Facet, Sequence[Item]]], k: int, repeats: int = 1,
                        cap: int = MAX_MANIFEST_ROWS) -> None:
    """Refuse, before any ordering is drawn, a K the items cannot take: more than the n! distinct orderings of an
    item of more than ENUMERATE_UP_TO components, or a manifest (K x repeats x items) of more than `cap` rows. The
    one line names the largest K the run allows and each cell's distinct orderings per item."""
    n_items = sum(len(items) for _, _, items in cells)
    if not n_items:
        return
    largest = cap // (repeats * n_items)
    why = f"a run folder's manifest holds at most {cap:,} rows: K x repeats={repeats} x {n_items:,} items"
    fix = "lower k, or audit fewer items (limit=)"
    per_cell = []
    for label, facet, items in cells:
        sizes = {item.item_id: len(facet.orderables(item)) for item in items}
        for item_id, n in sizes.items():
            if (most := max_k(n)) is not None and most < largest:
                largest, why = most, f"item {item_id} has {n} components, so {most:,} distinct orderings"
                fix = f"lower k, or leave out the items of {n} or more components"
        if sizes:
            low, high = min(sizes.values()), max(sizes.values())
            span = _orderings(low) + (f" to {_orderings(high)}" if high > low else "")
            per_cell.append(f"{label} {span} ({low}{f'-{high}' if high > low else ''} components)")
    if k > largest:
        raise ConfigError(
            f"k={k:,}: these items allow at most k={largest:,} ({why}); distinct orderings per item: "
            f"{'; '.join(per_cell)}. An item of up to {ENUMERATE_UP_TO} components repeats its orderings to reach K "
            f"(as FACET-PROBE v0.0.1 does), one of more needs K distinct ones; {fix}")


def _orderings(n: int, shown: int = 10**12) -> str:
    """n! in words for a message ('24', 'more than 1,000,000,000,000')."""
    count = distinct_orderings(n, shown)
    return f"{count:,}" if count <= shown else f"more than {shown:,}"


def manifest_frame(rows: list[ManifestRow]) -> pd.DataFrame:
    frame = pd.DataFrame([asdict(r) for r in rows])
    if frame.empty:
        frame = pd.DataFrame(columns=list(ManifestRow.__dataclass_fields__))
    return frame


def save_manifest(rows: list[ManifestRow], path: Path) -> None:
    """Write the manifest (Parquet) atomically."""
    frame = manifest_frame(rows)
    frame["permutation"] = frame["permutation"].map(list)
    frame["component_ids"] = frame["component_ids"].map(list)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def load_manifest(path: Path) -> list[ManifestRow]:
    frame = pd.read_parquet(path)
    rows = []
    for rec in frame.to_dict("records"):
        perm = tuple(int(x) for x in rec["permutation"])
        if not is_permutation(perm):
            raise ValueError(f"{path}: row for {rec['item_id']} has an invalid permutation {perm}")
        rows.append(ManifestRow(
            facet=rec["facet"], dataset=rec["dataset"], item_id=rec["item_id"],
            ordering_idx=int(rec["ordering_idx"]), repeat_idx=int(rec["repeat_idx"]), permutation=perm,
            component_ids=tuple(rec["component_ids"]), seed=int(rec["seed"]), k=int(rec["k"])))
    return rows
