"""document_rank_order: retrieved documents as a ranked list ("Document 1" = top rank).

A header says the list is ranked; each document's title is its heading (printed once: a first body
line that only repeats the title is dropped).
"""

from __future__ import annotations

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.facets import prompts as P
from facet_probe.facets.layout import LayoutFacet


class DocumentRankOrder(LayoutFacet):
    name = "document_rank_order"
    kinds = (ComponentKind.DOCUMENT,)
    rank = 3
    main = True
    noun = "document components"
    header = P.DOCUMENTS_HEADER

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(
            item_id="example::docs", dataset="example", answer_type="free",
            question="Which river flows through Paris?", gold_answer="Seine",
            components=(Component(id="d0", kind="document", text="Paris\nThe Seine flows through Paris.", title="Paris"),
                        Component(id="d1", kind="document", text="The Tiber flows through Rome.", title="Rome"),
                        Component(id="d2", kind="document", text="The Thames flows through London.", title="London")))
