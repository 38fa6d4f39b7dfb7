"""A toy plug-in facet (tests only): clues of its own component kind, or text chunks, under a header of its own.

It lives outside the package: this module on sys.path and `conf/facet/clue_order.yaml` on the config search
path are all it takes (tests/plugins/test_toy_facet.py).
"""

from __future__ import annotations

from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import Component, ComponentKind, Item, make_item

CLUE = "clue"


class ClueOrder(LayoutFacet):
    name = "clue_order"
    kinds = (CLUE, ComponentKind.TEXT_CHUNK)
    kind_labels = {CLUE: "Clue {n}"}
    system = "You are a careful detective. Read the clues and answer the question."
    noun = "clues"
    header = "Clues, in no particular order:"

    @classmethod
    def example(cls) -> Item:
        return make_item(item_id="example::clues", dataset="example", answer_type="free",
                         question="Who took the cake?", gold_answer="Ann",
                         components=(Component(id="k0", kind=CLUE, text="The thief wore red."),
                                     Component(id="k1", kind=CLUE, text="Ann wore red.")))
