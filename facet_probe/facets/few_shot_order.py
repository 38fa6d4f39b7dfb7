"""few_shot_order: demonstrations ("Example k" with question and answer) before the question."""

from __future__ import annotations

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.facets.layout import LayoutFacet


class FewShotOrder(LayoutFacet):
    name = "few_shot_order"
    kinds = (ComponentKind.FEW_SHOT,)
    rank = 7
    noun = "few-shot demonstrations"

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(
            item_id="example::fewshot", dataset="example", answer_type="free",
            question="What is the plural of mouse?", gold_answer="mice",
            components=(Component(id="e0", kind="few_shot", text="What is the plural of goose?", answer="geese"),
                        Component(id="e1", kind="few_shot", text="What is the plural of child?", answer="children"),
                        Component(id="e2", kind="few_shot", text="What is the plural of foot?", answer="feet")))
