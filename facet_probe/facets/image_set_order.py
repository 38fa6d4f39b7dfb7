"""image_set_order: a set of images, each labelled "Image k" by display slot, interleaved in order."""

from __future__ import annotations

from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import ComponentKind


class ImageSetOrder(LayoutFacet):
    name = "image_set_order"
    kinds = (ComponentKind.IMAGE,)
    noun = "image components"
