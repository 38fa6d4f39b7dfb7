"""The eight ordering facets: one renderer each, over the shared layout of `facets.layout`.

`FACETS` maps each facet name to its class (the names the configs in conf/facet/ use);
`MAIN_FACETS` lists the five main facets of the paper, in paper order.
"""

from __future__ import annotations

from facet_probe.facets.base import Facet, UnsupportedItem
from facet_probe.facets.dialog_turn_order import DialogTurnOrder
from facet_probe.facets.document_rank_order import DocumentRankOrder
from facet_probe.facets.evidence_chunk_order import EvidenceChunkOrder
from facet_probe.facets.few_shot_order import FewShotOrder
from facet_probe.facets.image_set_order import ImageSetOrder
from facet_probe.facets.mixed_modality_order import MixedModalityOrder
from facet_probe.facets.option_order import OptionOrder
from facet_probe.facets.tool_description_order import ToolDescriptionOrder

FACETS: dict[str, type[Facet]] = {
    cls.name: cls
    for cls in (OptionOrder, EvidenceChunkOrder, DocumentRankOrder, ImageSetOrder, MixedModalityOrder,
                DialogTurnOrder, FewShotOrder, ToolDescriptionOrder)
}
MAIN_FACETS: tuple[str, ...] = tuple(n for n, cls in FACETS.items() if cls.main)

__all__ = [
    "FACETS", "MAIN_FACETS", "DialogTurnOrder", "DocumentRankOrder", "EvidenceChunkOrder", "Facet",
    "FewShotOrder", "ImageSetOrder", "MixedModalityOrder", "OptionOrder", "ToolDescriptionOrder",
    "UnsupportedItem",
]
