"""synthetic_image_set: 2-5 pictures, each one coloured shape, as orderable image components, and a
four-option question about the set (image_set_order).

Shapes and colours are distinct across the set, so "What colour is the triangle?" names exactly one
picture whatever the order; the question never refers to a position.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader, image_component, mcq_choices
from facet_probe.datasets.synthetic.draw import Placed, render_png
from facet_probe.datasets.synthetic.visual_mcq import draw_scene, lookup_question


class SyntheticImageSet(SyntheticLoader):
    """Several single-shape pictures; the answer needs the one picture the question names."""

    facets: ClassVar[tuple[str, ...]] = ("image_set_order",)
    set_name: ClassVar[str] = "synthetic_image_set"

    def draw(self, rng: random.Random) -> Draft:
        pictures = draw_scene(rng, rng.randint(2, 5))
        task, question, gold, lures, pool = lookup_question(rng, pictures)
        choices, gold_index = mcq_choices(rng, gold, lures, pool)
        return Draft(task, {"pictures": pictures, "question": question, "choices": list(choices), "gold": gold},
                     {"choices": choices, "gold_index": gold_index})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        gold = draft.content["gold"]
        components = tuple(
            image_component(f"image-{i}", render_png([Placed(p["shape"], p["colour"])], self.image_size),
                            shape=p["shape"], colour=p["colour"], supporting=gold in (p["shape"], p["colour"]))
            for i, p in enumerate(draft.content["pictures"]))
        return self.make(item_id=item_id, question=draft.content["question"], components=components,
                         choices=draft.layout["choices"], gold_index=draft.layout["gold_index"], metadata=meta)
