"""synthetic_few_shot: 3-5 demonstrations that give a made-up code word to each of 2-3 categories
("What is the code word for cat?" -> "zorp"), then the same question for a new word (few_shot_order,
diagnostic).

The code words are drawn per item, so only the demonstrations tell which one names the new word's
category; each category keeps one code word, so the answer is unique and order-free.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader
from facet_probe.datasets.synthetic.vocab import CATEGORIES, CODEWORDS

QUESTION = "What is the code word for {w}?"


class SyntheticFewShot(SyntheticLoader):
    """Demonstrations map category members to code words; the query needs the right category's."""

    facets: ClassVar[tuple[str, ...]] = ("few_shot_order",)
    set_name: ClassVar[str] = "synthetic_few_shot"

    def draw(self, rng: random.Random) -> Draft:
        n_demos = rng.randint(3, 5)
        categories = rng.sample(sorted(CATEGORIES), rng.randint(2, 3))
        codes = dict(zip(categories, rng.sample(CODEWORDS, len(categories)), strict=True))
        demo_categories = [*categories, *(rng.choice(categories) for _ in range(n_demos - len(categories)))]
        rng.shuffle(demo_categories)
        words = {c: rng.sample(CATEGORIES[c], demo_categories.count(c) + 1) for c in categories}
        demos = [{"word": words[c].pop(), "category": c, "code": codes[c]} for c in demo_categories]
        asked = rng.choice(categories)
        query = words[asked].pop()
        return Draft("code_word", {"demos": demos, "question": QUESTION.format(w=query), "gold": codes[asked]})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        gold = draft.content["gold"]
        components = tuple(
            Component(id=f"demo-{i}", kind=ComponentKind.FEW_SHOT, text=QUESTION.format(w=d["word"]),
                      answer=d["code"], metadata={"supporting": d["code"] == gold, "answer": d["code"]})
            for i, d in enumerate(draft.content["demos"]))
        return self.make(item_id=item_id, question=draft.content["question"], components=components,
                         answer_type=AnswerType.FREE, gold_answer=gold, metadata=meta)
