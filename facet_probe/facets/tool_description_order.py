"""tool_description_order: tool descriptions as text ("Tool k: <name>" heading, then the description).

The answer is the name of the function to call, so the item must be a tool item and every tool needs
a unique name (its `title`).
"""

from __future__ import annotations

from facet_probe.facets import prompts as P
from facet_probe.facets.layout import LayoutFacet
from facet_probe.items import AnswerType, ComponentKind, Item


class ToolDescriptionOrder(LayoutFacet):
    name = "tool_description_order"
    kinds = (ComponentKind.TOOL,)
    main = False
    noun = "tool descriptions"
    header = P.TOOLS_HEADER

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
