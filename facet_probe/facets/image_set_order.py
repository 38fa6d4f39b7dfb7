"""image_set_order: a set of images, each labelled "Image k" by display slot, interleaved in order."""

from __future__ import annotations

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.facets.example_images import square_png
from facet_probe.facets.layout import LayoutFacet


class ImageSetOrder(LayoutFacet):
    name = "image_set_order"
    kinds = (ComponentKind.IMAGE,)
    rank = 4
    main = True
    noun = "image components"

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(item_id="example::images", dataset="example",
                         question="How many of the images are blue?",
                         components=(Component(id="i0", kind="image", image=square_png("blue")),
                                     Component(id="i1", kind="image", image=square_png("green")),
                                     Component(id="i2", kind="image", image=square_png("blue"))),
                         choices=("0", "1", "2", "3"), gold_index=2)
