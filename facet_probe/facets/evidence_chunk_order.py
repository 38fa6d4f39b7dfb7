"""evidence_chunk_order: text evidence chunks ("Chunk 1" ... by display slot) before the question."""

from __future__ import annotations

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.facets.layout import LayoutFacet


class EvidenceChunkOrder(LayoutFacet):
    name = "evidence_chunk_order"
    kinds = (ComponentKind.TEXT_CHUNK,)
    rank = 2
    main = True
    noun = "text chunk components"

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(item_id="example::evidence", dataset="example", answer_type="free",
                         question="Where does Ann live?", gold_answer="Oslo",
                         components=(Component(id="c0", kind="text_chunk", text="Ann lives in Oslo."),
                                     Component(id="c1", kind="text_chunk", text="Bob lives in Rome."),
                                     Component(id="c2", kind="text_chunk", text="Oslo is cold in winter.")))
