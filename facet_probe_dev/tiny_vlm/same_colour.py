"""A two-step picture task of the tiny VLM: "Which shape has the same colour as the circle?"

Not an audit set: it exists to give the model a question whose answer needs a step the
chain-of-thought rationale writes out (the named shape's colour, then the other shape of that colour),
so that a reasoned reply can be more accurate than a direct one (docs/tiny_vlm.md, the two-step
experiment). Each picture holds four distinct shapes in two colours, each colour twice, so no single
feature of the picture (a lone repeated colour) gives the answer away. The options are the four shapes
other than the named one, shuffled: the gold, the other pair, and the shape not drawn.

The owner variant (`OWNER_NAME`) adds a text step before the picture's two: "Ana has the circle. Ben has
the cross. Which shape has the same colour as Ben's shape?". Its options are the four shapes drawn (the
named one a lure), so they do not give the named shape away; its rationale starts with the owner's sentence.
"""

from __future__ import annotations

import random

from facet_probe.core.items import Item, make_item
from facet_probe.datasets.synthetic.base import image_component
from facet_probe.datasets.synthetic.draw import Placed, render_png
from facet_probe.datasets.synthetic.vocab import COLOURS, NAMES, SHAPES, a

NAME = "tiny_vlm_same_colour"
OWNER_NAME = "tiny_vlm_same_colour_owner"
FACETS = ("option_order",)
QUESTION = "Which shape has the same colour as the {s}?"
OWNER_QUESTION = "{facts} Which shape has the same colour as {who}'s shape?"
RATIONALE = "The figure shows {first} and {second}."
GRID = 2


def draw_scene(rng: random.Random) -> list[dict]:
    """Four distinct shapes in the four cells, two colours, each colour on two shapes."""
    shapes = rng.sample(SHAPES, GRID * GRID)
    first, second = rng.sample(sorted(COLOURS), 2)
    colours = [first, first, second, second]
    rng.shuffle(colours)
    return [{"shape": s, "colour": c, "cell": cell} for cell, (s, c) in enumerate(zip(shapes, colours, strict=True))]


def partner(scene: list[dict], shape: str) -> dict:
    """The other object of the named shape's colour."""
    colour = next(o["colour"] for o in scene if o["shape"] == shape)
    return next(o for o in scene if o["colour"] == colour and o["shape"] != shape)


def rationale(scene: list[dict], shape: str) -> str:
    """The two facts the answer needs: the named shape's colour, then the other shape of that colour."""
    named = next(o for o in scene if o["shape"] == shape)
    other = partner(scene, shape)
    return RATIONALE.format(first=a(f"{named['colour']} {named['shape']}"),
                            second=a(f"{other['colour']} {other['shape']}"))


def owners(rng: random.Random, scene: list[dict], target: str) -> dict[str, str]:
    """Two people in a random order, one holding `target`, the other another shape of the picture."""
    pairs = list(zip(rng.sample(NAMES, 2), [target, rng.choice([o["shape"] for o in scene if o["shape"] != target])],
                     strict=True))
    rng.shuffle(pairs)
    return dict(pairs)


def owner_question(held: dict[str, str], who: str) -> str:
    facts = " ".join(f"{name} has the {shape}." for name, shape in held.items())
    return OWNER_QUESTION.format(facts=facts, who=who)


def same_colour_items(n: int, seed: int = 42, split: str = "train", with_owners: bool = False) -> list[Item]:
    """`n` seeded items of `split` (each split its own random stream); `with_owners`: the owner variant."""
    name = OWNER_NAME if with_owners else NAME
    rng = random.Random(f"{name}/{split}/{seed}")
    items = []
    for i in range(n):
        scene = draw_scene(rng)
        target = rng.choice(scene)["shape"]
        meta = {"split": split, "task": "same_colour_owner" if with_owners else "same_colour"}
        if with_owners:
            held = owners(rng, scene, target)
            question = owner_question(held, next(who for who, shape in held.items() if shape == target))
            choices = [o["shape"] for o in scene]
            meta["owners"] = held
        else:
            question = QUESTION.format(s=target)
            choices = [s for s in SHAPES if s != target]
        rng.shuffle(choices)
        png = render_png([Placed(o["shape"], o["colour"], o["cell"]) for o in scene], 64, GRID)
        picture = image_component("picture", png, scene=scene, grid=GRID)
        items.append(make_item(item_id=f"{name}::{split}-{i:05d}", dataset=name, question=question,
                               fixed=(picture,), choices=tuple(choices),
                               gold_index=choices.index(partner(scene, target)["shape"]), metadata=meta))
    return items


def owner_items(n: int, seed: int = 42, split: str = "train") -> list[Item]:
    """`n` seeded items of the owner variant."""
    return same_colour_items(n, seed, split, with_owners=True)


__all__ = ["FACETS", "NAME", "OWNER_NAME", "QUESTION", "draw_scene", "owner_items", "owner_question", "partner",
           "rationale", "same_colour_items"]
