"""What a facet is: which components of an item it orders, and how it renders one ordering.

A facet is a plug-in: one module with one `Facet` subclass (its name, the component kinds it orders,
their labels, its prompt strings, its example item and its scoring rule, `choice_order`), declared by
`conf/facet/<name>.yaml` (`_target_` = the class) on the config search path; `facets.registry` lists them.
A facet is pure: (item, permutation, mode) -> Prompt, and (item, permutation, response text) -> Score via
its `choice_order`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

from facet_probe.core.items import Component, ComponentKind, Item
from facet_probe.core.prompts import Prompt, PromptMode
from facet_probe.facets import prompts as P


class UnsupportedItem(ValueError):
    """The facet cannot order this item (e.g. image_set_order on a text-only item)."""


class Facet(ABC):
    """Base class of the ordering facets (one subclass per plug-in module)."""

    #: The facet's name: its config's name and its module's name (run folders are named by the module).
    name: ClassVar[str]
    #: Component kinds this facet permutes (option_order permutes the item's choices instead); a plug-in may
    #: order a kind of its own (any lower-case identifier, see `core.items.Component.kind`).
    kinds: ClassVar[tuple[ComponentKind | str, ...]]
    #: Labels of the component kinds this facet brings ("Clue {n}"); the built-in kinds' are `layout.KIND_LABELS`.
    kind_labels: ClassVar[Mapping[str, str]] = {}
    #: The system text of its prompts.
    system: ClassVar[str] = P.SYSTEM_PROMPT
    #: Is this one of the five main facets of the paper (vs. a diagnostic facet)?
    main: ClassVar[bool] = False
    #: Where the facet comes in listings (the paper's order: its main facets first); ties go by name.
    rank: ClassVar[int] = 1000
    min_components: ClassVar[int] = 2

    def __init__(self, datasets: Sequence[str] = ()) -> None:
        #: The datasets this facet is audited on (a config value; `dataset=` narrows to one).
        self.datasets = tuple(datasets)

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md's previews, the contract tests)."""
        raise NotImplementedError(f"facet {cls.name} has no example item; define the classmethod `example()`")

    def orderables(self, item: Item) -> tuple[Component, ...]:
        """The components this facet orders, in source order."""
        return item.components_of(*self.kinds)

    def foreign_kinds_reason(self, item: Item) -> str | None:
        """A reason when the item has components of a kind that is neither built in nor this facet's (a plug-in
        facet's kind under another facet, or a misspelt kind, would otherwise render as an unlabelled block)."""
        known = {*ComponentKind, *self.kinds, *self.kind_labels}
        foreign = sorted({str(c.kind) for c in (*item.components, *item.fixed) if c.kind not in known})
        if foreign:
            return (f"item {item.item_id} has components of kind {', '.join(foreign)}, which {self.name} does not "
                    f"know (built-in kinds: {', '.join(ComponentKind)}; its own: {', '.join(map(str, self.kinds))})")
        return None

    def unsupported_reason(self, item: Item) -> str | None:
        """None if the facet can order the item, else a one-line reason."""
        if reason := self.foreign_kinds_reason(item):
            return reason
        n = len(self.orderables(item))
        if n < self.min_components:
            kinds = ", ".join(str(k) for k in self.kinds)
            return (f"{self.name} orders {kinds} components; item {item.item_id} has {n} "
                    f"(needs at least {self.min_components})")
        return None

    def check(self, item: Item) -> None:
        reason = self.unsupported_reason(item)
        if reason:
            raise UnsupportedItem(reason)

    def choice_order(self, item: Item, permutation: Sequence[int]) -> tuple[int, ...]:
        """Display slot -> source choice index for the item's options (identity unless the facet
        permutes the choices): the facet's scoring rule, scoring maps a displayed letter back through this."""
        return tuple(range(len(item.choices)))

    @abstractmethod
    def render(self, item: Item, permutation: Sequence[int], mode: PromptMode = PromptMode.DIRECT) -> Prompt:
        """The prompt showing the item's orderables in display order (slot j = source perm[j])."""
