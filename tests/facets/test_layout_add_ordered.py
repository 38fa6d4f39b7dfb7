"""`LayoutFacet.add_ordered` is given the item rendered: a layout that needs item metadata (a table header)
reads it there, so renders that overlap never see each other's item; a plug-in written against the old
`add_ordered(self, b, shown)` still renders, with a FutureWarning saying how to update it."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.facets.layout import LayoutFacet, MessageBuilder, add_labelled


def table_item(item_id: str, header: str) -> Item:
    return make_item(item_id=item_id, dataset="tables", answer_type="free", question="Which row is largest?",
                     gold_answer="b", metadata={"table_header": header},
                     components=tuple(Component(id=f"r{i}", kind=ComponentKind.TEXT_CHUNK, text=f"row {i}")
                                      for i in range(3)))


class RowOrder(LayoutFacet):
    """Rows of a table under the table's own header (`item.metadata["table_header"]`)."""

    name = "row_order"
    kinds = (ComponentKind.TEXT_CHUNK,)
    kind_labels = {ComponentKind.TEXT_CHUNK: "Row {n}"}
    both_inside = threading.Barrier(2, timeout=10)  # holds each render until the other one is in add_ordered too

    def add_ordered(self, b: MessageBuilder, shown: Sequence[Component], item: Item) -> None:
        self.both_inside.wait()
        b.block(f"Table: {item.metadata['table_header']}")
        add_labelled(b, shown, self.labels())


class OldStyleClueOrder(LayoutFacet):
    """A plug-in written before the item was passed: it overrides `add_ordered(self, b, shown)`."""

    name = "old_style_clue_order"
    kinds = (ComponentKind.TEXT_CHUNK,)
    header = "Clues:"

    def add_ordered(self, b, shown):
        super().add_ordered(b, shown)
        b.block(f"({len(shown)} clues)")


def test_two_interleaved_renders_each_show_their_own_items_header():
    facet = RowOrder()  # one instance, as an audit shares it across its concurrent calls
    items = [table_item("tables::1", "Sales 2023 (EUR)"), table_item("tables::2", "Rainfall (mm)")]
    with ThreadPoolExecutor(2) as pool:  # both renders inside add_ordered at once
        prompts = list(pool.map(lambda it: facet.render(it, (2, 0, 1)), items))
    texts = [p.messages[0].parts[0].text for p in prompts]
    assert texts[0].startswith("Table: Sales 2023 (EUR)\n\nRow 1: row 2\n\nRow 2: row 0\n\nRow 3: row 1")
    assert texts[1].startswith("Table: Rainfall (mm)\n\nRow 1: row 2")


def test_an_old_style_plug_in_renders_with_a_deprecation_warning():
    item = table_item("tables::1", "unused")
    with pytest.warns(FutureWarning, match=r"OldStyleClueOrder\.add_ordered\(self, b, shown\) is the old "
                                                r"signature: add the item rendered, add_ordered\(self, b, shown, item\)"):
        prompt = OldStyleClueOrder().render(item, (1, 0, 2))
    assert prompt.messages[0].parts[0].text.startswith(
        "Clues:\n\nChunk 1: row 1\n\nChunk 2: row 0\n\nChunk 3: row 2\n\n(3 clues)\n\nQuestion: Which row is largest?")


def test_the_built_in_facets_take_the_item_without_a_warning(items):
    from facet_probe.facets import FACETS

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        for name, cls in FACETS.items():
            facet = cls()
            assert facet.render(items[name], tuple(range(len(facet.orderables(items[name]))))).messages
