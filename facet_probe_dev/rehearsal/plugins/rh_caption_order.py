"""rh_caption_order: captions of one scene (a component kind of this folder's own) in a varying order."""

from __future__ import annotations

from facet_probe.core.items import Component, Item, make_item
from facet_probe.facets.layout import LayoutFacet

CAPTION = "caption"


class CaptionOrder(LayoutFacet):
    name = "rh_caption_order"
    kinds = (CAPTION,)
    kind_labels = {CAPTION: "Caption {n}"}
    header = "Captions of one scene, in no particular order:"
    noun = "captions"

    @classmethod
    def example(cls) -> Item:
        return make_item(item_id="example::captions", dataset="example", answer_type="free",
                         question="What colour is the kite?", gold_answer="red",
                         components=(Component(id="c0", kind=CAPTION, text="The kite is red."),
                                     Component(id="c1", kind=CAPTION, text="The boat is blue.")))
