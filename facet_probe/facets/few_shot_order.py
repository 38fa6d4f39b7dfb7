"""few_shot_order: demonstrations ("Example k" with question and answer) before the question."""

from __future__ import annotations

from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import ComponentKind


class FewShotOrder(LayoutFacet):
    name = "few_shot_order"
    kinds = (ComponentKind.FEW_SHOT,)
    main = False
    noun = "few-shot demonstrations"
