"""synthetic_visual_mcq: one picture of 2-4 coloured shapes (fixed context) and a four-option
question about it (option_order).

"What colour is the circle?" or "Which shape is red?": every shape and every colour occurs at most
once per picture, so each question has exactly one answer, and it can only be read off the picture.
The other shapes' colours (or shapes) are the first lures.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader, image_component, mcq_choices
from facet_probe.datasets.synthetic.draw import Placed, render_png
from facet_probe.datasets.synthetic.vocab import COLOURS, SHAPES

GRID = 2


def draw_scene(rng: random.Random, count: int) -> list[dict[str, str]]:
    """`count` shapes with distinct shapes and distinct colours."""
    shapes = rng.sample(SHAPES, count)
    colours = rng.sample(sorted(COLOURS), count)
    return [{"shape": s, "colour": c} for s, c in zip(shapes, colours, strict=True)]


def lookup_question(rng: random.Random, objects: list[dict[str, str]]) -> tuple[str, str, str, list[str], list[str]]:
    """Ask for the colour of one shape or the shape of one colour among `objects`.

    Returns (task, question, gold, lures, pool)."""
    target = rng.choice(objects)
    if rng.random() < 0.5:
        lures = [o["colour"] for o in objects if o is not target]
        return ("colour_of_shape", f"What colour is the {target['shape']}?", target["colour"], lures,
                sorted(COLOURS))
    lures = [o["shape"] for o in objects if o is not target]
    return "shape_of_colour", f"Which shape is {target['colour']}?", target["shape"], lures, list(SHAPES)


class SyntheticVisualMCQ(SyntheticLoader):
    """A picture as fixed context, a question about it, four options."""

    facets: ClassVar[tuple[str, ...]] = ("option_order",)
    set_name: ClassVar[str] = "synthetic_visual_mcq"

    def draw(self, rng: random.Random) -> Draft:
        scene = draw_scene(rng, rng.randint(2, GRID * GRID))
        task, question, gold, lures, pool = lookup_question(rng, scene)
        choices, gold_index = mcq_choices(rng, gold, lures, pool)
        cells = rng.sample(range(GRID * GRID), len(scene))
        return Draft(task, {"scene": scene, "question": question, "choices": list(choices), "gold": gold},
                     {"cells": cells, "choices": choices, "gold_index": gold_index})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        scene = [{**o, "cell": cell} for o, cell in zip(draft.content["scene"], draft.layout["cells"], strict=True)]
        placed = [Placed(o["shape"], o["colour"], o["cell"]) for o in scene]
        picture = image_component("picture", render_png(placed, self.image_size, GRID), scene=scene, grid=GRID)
        return self.make(item_id=item_id, question=draft.content["question"], fixed=(picture,),
                         choices=draft.layout["choices"], gold_index=draft.layout["gold_index"], metadata=meta)
