"""option_order: the options of a multiple-choice item, shown in permuted order.

Display slot j (letter A + j) shows source option ``permutation[j]``; `choice_order` returns the
permutation, so a displayed letter maps back to the source option. Components and fixed context
(e.g. the MathVision figure) stay in source order before the question.
"""

from __future__ import annotations

from collections.abc import Sequence

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.facets.example_images import square_png
from facet_probe.facets.layout import LayoutFacet, MessageBuilder, check_permutation


class OptionOrder(LayoutFacet):
    name = "option_order"
    kinds = (ComponentKind.CHOICE,)
    rank = 1
    main = True
    noun = "the options of a multiple-choice item"

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(item_id="example::option", dataset="example",
                         question="Which shape is shown in the figure?",
                         fixed=(Component(id="figure", kind="image", image=square_png("red")),),
                         choices=("circle", "square", "triangle", "star"), gold_index=1)

    def orderables(self, item: Item) -> tuple[Component, ...]:
        """One choice component per option, ids ``choice0..``, built from `item.choices`."""
        return tuple(Component(id=f"choice{i}", kind=ComponentKind.CHOICE, text=text)
                     for i, text in enumerate(item.choices))

    def unsupported_reason(self, item: Item) -> str | None:
        if item.answer_type != AnswerType.MCQ:
            return (f"option_order permutes the options of a multiple-choice item; item {item.item_id} "
                    f"is {item.answer_type} (no options)")
        return super().unsupported_reason(item)

    def choice_order(self, item: Item, permutation: Sequence[int]) -> tuple[int, ...]:
        """Display slot -> source option index: the permutation itself."""
        return check_permutation(self.name, item, permutation, len(item.choices))

    def add_ordered(self, b: MessageBuilder, shown: Sequence[Component], item: Item | None = None) -> None:
        """The permuted options are rendered after the question (see `choice_order`)."""
