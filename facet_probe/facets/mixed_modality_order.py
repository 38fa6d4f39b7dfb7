"""mixed_modality_order: text and image components interleaved in one permuted sequence.

Labels count by display slot within each kind ("Chunk 1", "Image 1", "Chunk 2", ...). The item needs
at least one image and at least one text (chunk or document) component.
"""

from __future__ import annotations

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.facets.example_images import square_png
from facet_probe.facets.layout import LayoutFacet


class MixedModalityOrder(LayoutFacet):
    name = "mixed_modality_order"
    kinds = (ComponentKind.TEXT_CHUNK, ComponentKind.DOCUMENT, ComponentKind.IMAGE)
    rank = 5
    main = True
    noun = "text and image components"

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(item_id="example::mixed", dataset="example", answer_type="free",
                         question="What colour is the flag Ann painted?", gold_answer="green",
                         components=(Component(id="t0", kind="text_chunk", text="Ann and Bob each painted a flag."),
                                     Component(id="m0", kind="image", text="Painted by Bob.", image=square_png("yellow")),
                                     Component(id="t1", kind="text_chunk", text="Bob likes yellow."),
                                     Component(id="m1", kind="image", text="Painted by Ann.", image=square_png("green"))))

    def unsupported_reason(self, item: Item) -> str | None:
        comps = self.orderables(item)
        n_img = sum(c.kind == ComponentKind.IMAGE for c in comps)
        n_txt = len(comps) - n_img
        if n_img == 0 or n_txt == 0:
            return (f"mixed_modality_order needs both text and image components; item {item.item_id} "
                    f"has {n_txt} text and {n_img} image")
        return super().unsupported_reason(item)
