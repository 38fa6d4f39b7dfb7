"""hint_set: generated riddles, each a few hints and a one-word answer (for the hint_order facet)."""

from __future__ import annotations

from typing import ClassVar

from facet_probe.datasets.base import DatasetLoader
from facet_probe.items import Component, Item, make_item

RIDDLES = {"cat": ("It purrs.", "It chases mice.", "It has whiskers."),
           "cow": ("It moos.", "It gives milk.", "It eats grass."),
           "owl": ("It hoots.", "It flies at night.", "It has large eyes."),
           "bee": ("It buzzes.", "It makes honey.", "It lives in a hive.")}


class HintSet(DatasetLoader):
    """Every riddle of `RIDDLES`, in its order."""

    facets: ClassVar[tuple[str, ...]] = ("hint_order",)

    def load_all(self) -> list[Item]:
        return [make_item(item_id=f"{self.name}::{answer}", dataset=self.name, answer_type="free",
                          question="Which animal is it?", gold_answer=answer,
                          components=tuple(Component(id=f"h{i}", kind="hint", text=t) for i, t in enumerate(hints)))
                for answer, hints in RIDDLES.items()]
