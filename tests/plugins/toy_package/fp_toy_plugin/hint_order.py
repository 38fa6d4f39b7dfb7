"""hint_order: hints (a component kind of this package's own) labelled "Hint k" by display slot."""

from __future__ import annotations

from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import Component, Item, make_item

HINT = "hint"


class HintOrder(LayoutFacet):
    name = "hint_order"
    kinds = (HINT,)
    kind_labels = {HINT: "Hint {n}"}
    noun = "hints"

    @classmethod
    def example(cls) -> Item:
        return make_item(item_id="example::hints", dataset="example", answer_type="free",
                         question="Which animal is it?", gold_answer="cat",
                         components=(Component(id="h0", kind=HINT, text="It purrs."),
                                     Component(id="h1", kind=HINT, text="It chases mice.")))
