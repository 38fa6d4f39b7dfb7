"""synthetic_mixed: 3-5 interleaved text and image components (alternating in source order), each
stating one shape-colour fact, and a free-form one-word question (mixed_modality_order).

A sentence ("The square is blue.") or a picture (a blue square) carries each fact; the question asks
for one fact, which sits in either modality with equal probability. Shapes and colours are distinct
within an item, so the short gold answer scores by exact match, with no judge.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader, image_component
from facet_probe.datasets.synthetic.draw import Placed, render_png
from facet_probe.datasets.synthetic.visual_mcq import draw_scene


def fact_sentence(fact: dict[str, str]) -> str:
    return f"The {fact['shape']} is {fact['colour']}."


class SyntheticMixed(SyntheticLoader):
    """Shape-colour facts, alternately as sentences and as pictures; one is asked for."""

    facets: ClassVar[tuple[str, ...]] = ("mixed_modality_order",)
    set_name: ClassVar[str] = "synthetic_mixed"

    def draw(self, rng: random.Random) -> Draft:
        facts = draw_scene(rng, rng.randint(3, 5))
        first = rng.choice(("text", "image"))
        second = "image" if first == "text" else "text"
        for i, fact in enumerate(facts):
            fact["modality"] = first if i % 2 == 0 else second
        target = rng.choice(facts)
        if rng.random() < 0.5:
            task, question, field = "colour_of_shape", f"What colour is the {target['shape']}?", "colour"
        else:
            task, question, field = "shape_of_colour", f"Which shape is {target['colour']}?", "shape"
        return Draft(task, {"facts": facts, "question": question, "field": field, "gold": target[field]})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        gold, field = draft.content["gold"], draft.content["field"]
        components = []
        for i, fact in enumerate(draft.content["facts"]):
            extra = {"shape": fact["shape"], "colour": fact["colour"], "supporting": fact[field] == gold,
                     "answer": fact[field]}
            if fact["modality"] == "text":
                components.append(Component(id=f"text-{i}", kind=ComponentKind.TEXT_CHUNK,
                                            text=fact_sentence(fact), metadata=extra))
            else:
                png = render_png([Placed(fact["shape"], fact["colour"])], self.image_size)
                components.append(image_component(f"image-{i}", png, **extra))
        return self.make(item_id=item_id, question=draft.content["question"], components=tuple(components),
                         answer_type=AnswerType.FREE, gold_answer=gold, metadata=meta)
