"""The paper's released artifact ids (`csqa::<id>`, `mantis::dj_2::0064`, bare MMQA qids) -> our item ids.

The reference repository (yahskapar/facet-probe) releases per-item files (the image-set screen CSV, the ODI
per-item parameters) under the ids of the older evaluation scripts, which differ from both ours
(`<dataset>::<upstream id>`) and its runner's (`<reference dataset name>::<raw id>`). The map is data,
`facet_probe/assets/reference_ids.csv`: one row per (facet, artifact dataset) with the artifact's prefix and
what follows it; ids made of positions (MultiHop-RAG, MMDocRAG) and MRAMG's unconfirmed form are not mapped.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib.resources import files
from typing import Any


class RawForm(StrEnum):
    """What follows the artifact prefix."""

    UPSTREAM = "upstream"  #: the upstream id itself: mapped
    UPSTREAM_THEN_INDEX = "upstream_then_index"  #: `<upstream id>::<index>` (Mantis-Eval): mapped
    BUFFER_INDEX = "buffer_index"  #: a position in a shuffled buffer of unknown size: not mapped
    SELECTION_RANK = "selection_rank"  #: a rank in the release's selection: not mapped
    UNKNOWN = "unknown"  #: a form the release does not let us confirm: not mapped


@dataclass(frozen=True)
class ArtifactIds:
    """How one dataset's items are named in the paper's released artifacts."""

    facet: str
    artifact_dataset: str  #: the `dataset` column of the released files
    artifact_prefix: str
    dataset: str  #: our dataset config name
    reference_name: str  #: the reference runner's dataset name
    raw: RawForm
    note: str

    def raw_id(self, artifact_id: str) -> str | None:
        """The upstream id inside an artifact id, or None where the form does not carry it."""
        if not artifact_id.startswith(self.artifact_prefix):
            return None
        rest = artifact_id[len(self.artifact_prefix):]
        if self.raw is RawForm.UPSTREAM:
            return rest
        if self.raw is RawForm.UPSTREAM_THEN_INDEX:
            head, sep, index = rest.rpartition("::")
            return head if sep and index.isdigit() else None
        return None


@cache
def artifact_ids() -> tuple[ArtifactIds, ...]:
    """The rows of `assets/reference_ids.csv`."""
    text = files("facet_probe.assets").joinpath("reference_ids.csv").read_text(encoding="utf-8")
    rows: list[dict[str, Any]] = list(csv.DictReader(text.splitlines()))
    return tuple(ArtifactIds(**{**row, "raw": RawForm(row["raw"])}) for row in rows)


def spec_for(facet: str, artifact_dataset: str) -> ArtifactIds | None:
    return next((a for a in artifact_ids() if (a.facet, a.artifact_dataset) == (facet, artifact_dataset)), None)


def to_item_id(artifact_id: str, facet: str, artifact_dataset: str) -> str | None:
    """Our item id (`<dataset>::<upstream id>`, sampling=stable) for a released artifact id; None where the
    release's ids carry no upstream id (see `RawForm`)."""
    spec = spec_for(facet, artifact_dataset)
    raw = spec.raw_id(artifact_id) if spec else None
    return f"{spec.dataset}::{raw}" if spec and raw is not None else None


def to_reference_id(artifact_id: str, facet: str, artifact_dataset: str) -> str | None:
    """The reference runner's id (`<its dataset name>::<upstream id>`, our sampling=reference) for it."""
    spec = spec_for(facet, artifact_dataset)
    raw = spec.raw_id(artifact_id) if spec else None
    return f"{spec.reference_name}::{raw}" if spec and raw is not None else None
