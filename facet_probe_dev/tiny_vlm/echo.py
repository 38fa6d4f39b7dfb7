"""An auxiliary training task of the tiny VLM: "Which option says kite?" over four word options.

It is not an audit dataset: it only teaches, in the real option_order prompt format, the step every
multiple-choice set shares and a tiny model learns last: reading the letter of the option whose
content is named (in the question, or in a chain-of-thought rationale). Measured (docs/tiny_vlm.md):
without it the letter after "The answer is (" stays at chance even when the rationale names the gold.
The words come from the synthetic vocabulary; the gold slot is uniform (options shuffled), so it
teaches no position.
"""

from __future__ import annotations

import random

from facet_probe.core.items import Item, make_item
from facet_probe.datasets.synthetic import vocab

NAME = "tiny_vlm_echo"
FACETS = ("option_order",)
QUESTION = "Which option says {w}?"
RATIONALE = "The option says {w}."


def words() -> list[str]:
    """Every one-word value of the synthetic vocabulary (the words the MCQ options are made of)."""
    pools = [vocab.SHAPES, vocab.COLOURS, vocab.NAMES, vocab.CITIES, vocab.JOBS, vocab.OBJECTS,
             vocab.CONTAINERS, *vocab.CATEGORIES.values()]
    return sorted({w for pool in pools for w in pool if w.isalpha()})


def echo_items(n: int, seed: int = 42) -> list[Item]:
    """`n` seeded echo items: four distinct words, the asked one uniformly placed."""
    rng = random.Random(f"{NAME}/{seed}")
    pool = words()
    items = []
    for i in range(n):
        choices = rng.sample(pool, 4)
        gold = rng.randrange(4)
        items.append(make_item(item_id=f"{NAME}::train-{i:05d}", dataset=NAME,
                               question=QUESTION.format(w=choices[gold]), choices=tuple(choices), gold_index=gold,
                               metadata={"split": "train", "task": "echo"}))
    return items


__all__ = ["FACETS", "NAME", "QUESTION", "RATIONALE", "echo_items", "words"]
