"""rh_captions: generated scenes, each a few captions naming a thing and its colour; the question asks one colour."""

from __future__ import annotations

import random
from typing import ClassVar

from facet_probe.core.items import Component, Item, make_item
from facet_probe.datasets.base import DatasetLoader

THINGS = ("kite", "boat", "lamp", "chair", "drum", "hat", "ball", "cup")
COLOURS = ("red", "blue", "green", "yellow", "black", "white")


class Captions(DatasetLoader):
    """A hundred scenes of four captions, drawn from a fixed seed (the sampling of `n` and `seed` is the base's)."""

    facets: ClassVar[tuple[str, ...]] = ("rh_caption_order",)

    def load_all(self) -> list[Item]:
        rng = random.Random(7)
        items = []
        for index in range(100):
            things, colours = rng.sample(THINGS, 4), rng.sample(COLOURS, 4)
            asked = rng.randrange(4)
            captions = tuple(Component(id=f"c{i}", kind="caption", text=f"The {t} is {c}.",
                                       metadata={"answer": c, "supporting": i == asked})
                             for i, (t, c) in enumerate(zip(things, colours, strict=True)))
            items.append(make_item(item_id=f"{self.name}::{index:03d}", dataset=self.name, answer_type="free",
                                   question=f"What colour is the {things[asked]}?", gold_answer=colours[asked],
                                   components=captions))
        return items
