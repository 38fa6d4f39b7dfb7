"""synthetic_mcq: short text multiple-choice questions with four options (option_order).

Two templates: "Which one is a fruit?" (one member of the category among members of others) and a
who-has-what question whose facts sit in the question ("Ana has a kite. Ben has a cup. What does Ben
have?"), where the other people's objects are the lures.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader, mcq_choices
from facet_probe.datasets.synthetic.vocab import CATEGORIES, NAMES, OBJECTS, a


def _category_draft(rng: random.Random) -> Draft:
    category = rng.choice(sorted(CATEGORIES))
    gold = rng.choice(CATEGORIES[category])
    others = [w for c, words in sorted(CATEGORIES.items()) if c != category for w in words]
    choices, gold_index = mcq_choices(rng, gold, [], others)
    question = f"Which one is {a(category)}?"
    return Draft("category", {"question": question, "choices": list(choices), "gold": gold},
                 {"choices": choices, "gold_index": gold_index})


def _possession_draft(rng: random.Random) -> Draft:
    people = rng.sample(NAMES, rng.randint(2, 3))
    objects = rng.sample(OBJECTS, len(people))
    asked = rng.randrange(len(people))
    facts = [{"name": p, "object": o} for p, o in zip(people, objects, strict=True)]
    gold = objects[asked]
    choices, gold_index = mcq_choices(rng, gold, [o for o in objects if o != gold], OBJECTS)
    story = " ".join(f"{f['name']} has {a(f['object'])}." for f in facts)
    question = f"{story} What does {people[asked]} have?"
    return Draft("possession", {"facts": facts, "asked": people[asked], "choices": list(choices), "gold": gold},
                 {"question": question, "choices": choices, "gold_index": gold_index})


class SyntheticMCQ(SyntheticLoader):
    """Text MCQ; the option-order facet permutes its four choices."""

    facets: ClassVar[tuple[str, ...]] = ("option_order",)
    set_name: ClassVar[str] = "synthetic_mcq"

    def draw(self, rng: random.Random) -> Draft:
        return (_category_draft if rng.random() < 0.5 else _possession_draft)(rng)

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        question = draft.layout.get("question", draft.content.get("question"))
        return self.make(item_id=item_id, question=question, choices=draft.layout["choices"],
                         gold_index=draft.layout["gold_index"], metadata=meta)
