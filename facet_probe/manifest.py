"""Manifests: the K orderings (x R repeats) per (item, facet), drawn once and saved before any call.

A saved manifest is replayed exactly for every model, so all models see the same orderings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from facet_probe.atomic import atomic_path
from facet_probe.facets.base import Facet
from facet_probe.items import Item
from facet_probe.permutations import is_permutation, sample_permutations


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
