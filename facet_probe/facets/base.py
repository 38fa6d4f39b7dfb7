"""What a facet is: which components of an item it orders, and how it renders one ordering.

One subclass per facet (one module each). A facet is pure: (item, permutation, mode) -> Prompt,
and (item, permutation, response text) -> Score via its scorer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from facet_probe.items import Component, ComponentKind, Item
from facet_probe.prompts import Prompt, PromptMode


class UnsupportedItem(ValueError):
    """The facet cannot order this item (e.g. image_set_order on a text-only item)."""


class Facet(ABC):
    """Base class of the eight ordering facets."""

    name: ClassVar[str]
    #: Component kinds this facet permutes (option_order permutes the item's choices instead).
    kinds: ClassVar[tuple[ComponentKind, ...]]
    #: Is this one of the five main facets of the paper (vs. a diagnostic facet)?
    main: ClassVar[bool] = True
    min_components: ClassVar[int] = 2

    def __init__(self, datasets: Sequence[str] = ()) -> None:
        #: The paper datasets this facet is audited on (a config value; `dataset=` narrows to one).
        self.datasets = tuple(datasets)

    def orderables(self, item: Item) -> tuple[Component, ...]:
        """The components this facet orders, in source order."""
        return item.components_of(*self.kinds)

    def unsupported_reason(self, item: Item) -> str | None:
        """None if the facet can order the item, else a one-line reason."""
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
        permutes the choices). Scoring maps a displayed letter back through this."""
        return tuple(range(len(item.choices)))

    @abstractmethod
    def render(self, item: Item, permutation: Sequence[int], mode: PromptMode = PromptMode.DIRECT) -> Prompt:
        """The prompt showing the item's orderables in display order (slot j = source perm[j])."""
