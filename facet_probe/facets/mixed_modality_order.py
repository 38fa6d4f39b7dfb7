"""mixed_modality_order: text and image components interleaved in one permuted sequence.

Labels count by display slot within each kind ("Chunk 1", "Image 1", "Chunk 2", ...). The item needs
at least one image and at least one text (chunk or document) component.
"""

from __future__ import annotations

from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import ComponentKind, Item


class MixedModalityOrder(LayoutFacet):
    name = "mixed_modality_order"
    kinds = (ComponentKind.TEXT_CHUNK, ComponentKind.DOCUMENT, ComponentKind.IMAGE)
    noun = "text and image components"

    def unsupported_reason(self, item: Item) -> str | None:
        comps = self.orderables(item)
        n_img = sum(c.kind == ComponentKind.IMAGE for c in comps)
        n_txt = len(comps) - n_img
        if n_img == 0 or n_txt == 0:
            return (f"mixed_modality_order needs both text and image components; item {item.item_id} "
                    f"has {n_txt} text and {n_img} image")
        return super().unsupported_reason(item)
