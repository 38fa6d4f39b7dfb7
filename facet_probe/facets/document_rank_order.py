"""document_rank_order: retrieved documents as a ranked list ("Document 1" = top rank).

A header says the list is ranked; each document's title is its heading (printed once: a first body
line that only repeats the title is dropped).
"""

from __future__ import annotations

from facet_probe.facets import prompts as P
from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import ComponentKind


class DocumentRankOrder(LayoutFacet):
    name = "document_rank_order"
    kinds = (ComponentKind.DOCUMENT,)
    noun = "document components"
    header = P.DOCUMENTS_HEADER
