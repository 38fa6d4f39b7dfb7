"""synthetic_dialog: 3-6 earlier dialog turns (alternating user/assistant in source order), each
placing one object in one container, then "Where is the key?" (dialog_turn_order, diagnostic).

Objects and containers are distinct within an item, so exactly one turn answers, whatever the order.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader
from facet_probe.datasets.synthetic.vocab import CONTAINERS, OBJECTS

TURN_TEMPLATES = {"user": "I put the {o} in the {c}.", "assistant": "The {o} is in the {c}."}


def turn_text(role: str, fact: dict[str, str]) -> str:
    return TURN_TEMPLATES[role].format(o=fact["object"], c=fact["container"])


class SyntheticDialog(SyntheticLoader):
    """Earlier turns of a chat that each say where one object is."""

    facets: ClassVar[tuple[str, ...]] = ("dialog_turn_order",)
    set_name: ClassVar[str] = "synthetic_dialog"

    def draw(self, rng: random.Random) -> Draft:
        n_turns = rng.randint(3, 6)
        facts = [{"object": o, "container": c}
                 for o, c in zip(rng.sample(OBJECTS, n_turns), rng.sample(CONTAINERS, n_turns), strict=True)]
        target = rng.choice(facts)
        return Draft("where_is", {"facts": facts, "question": f"Where is the {target['object']}?",
                                  "gold": target["container"]})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        gold = draft.content["gold"]
        components = []
        for i, fact in enumerate(draft.content["facts"]):
            role = "user" if i % 2 == 0 else "assistant"
            components.append(Component(
                id=f"turn-{i}", kind=ComponentKind.DIALOG_TURN, role=role, text=turn_text(role, fact),
                metadata={"supporting": fact["container"] == gold, "answer": fact["container"]}))
        return self.make(item_id=item_id, question=draft.content["question"], components=tuple(components),
                         answer_type=AnswerType.FREE, gold_answer=gold, metadata=meta)
