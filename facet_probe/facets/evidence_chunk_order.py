"""evidence_chunk_order: text evidence chunks ("Chunk 1" ... by display slot) before the question."""

from __future__ import annotations

from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import ComponentKind


class EvidenceChunkOrder(LayoutFacet):
    name = "evidence_chunk_order"
    kinds = (ComponentKind.TEXT_CHUNK,)
    noun = "text chunk components"
