"""tool_description_order: tool descriptions as text ("Tool k: <name>" heading, then the description).

The answer is the name of the function to call, so the item must be a tool item and every tool needs
a unique name (its `title`).
"""

from __future__ import annotations

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.facets import prompts as P
from facet_probe.facets.layout import LayoutFacet


class ToolDescriptionOrder(LayoutFacet):
    name = "tool_description_order"
    kinds = (ComponentKind.TOOL,)
    rank = 8
    noun = "tool descriptions"
    header = P.TOOLS_HEADER

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(
            item_id="example::tools", dataset="example", answer_type="tool",
            question="What will the weather be in Oslo tomorrow?", gold_answer="get_forecast",
            components=(Component(id="f0", kind="tool", text="Returns the current time in a city.", title="get_time"),
                        Component(id="f1", kind="tool", text="Returns the weather forecast for a city and day.",
                                  title="get_forecast"),
                        Component(id="f2", kind="tool", text="Converts an amount between currencies.",
                                  title="convert_currency")))

    def unsupported_reason(self, item: Item) -> str | None:
        if item.answer_type != AnswerType.TOOL:
            return (f"tool_description_order needs a tool item (answer = a function name); "
                    f"item {item.item_id} is {item.answer_type}")
        names = [(c.title or "").strip() for c in self.orderables(item)]
        if any(not n for n in names):
            return f"tool_description_order: item {item.item_id} has a tool without a name (title)"
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            return f"tool_description_order: item {item.item_id} has duplicate tool names {dupes}"
        return super().unsupported_reason(item)
