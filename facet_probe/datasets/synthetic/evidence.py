"""synthetic_evidence: 3-6 one-sentence evidence chunks about several people, and a short free-form
question that one or two of them answer (evidence_chunk_order).

One-hop: "Which city does Ana live in?" with lures about other people's cities and Ana's other
facts. Two-hop (a third of the items): "Which city does the best friend of Ana live in?" needs the
friend chunk and the friend's city chunk, with Ana's own city as a lure. Every person has at most one
fact per relation and values never repeat in an item, so the answer is unique and order-free.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader
from facet_probe.datasets.synthetic.vocab import ANIMALS, CITIES, FRUITS, NAMES

TWO_HOP_RATE = 1 / 3

#: relation -> (fact template, one-hop question, two-hop question, values)
RELATIONS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "city": ("{s} lives in {v}.", "Which city does {s} live in?",
             "Which city does the best friend of {s} live in?", CITIES),
    "pet": ("{s} has a pet {v}.", "Which pet does {s} have?",
            "Which pet does the best friend of {s} have?", ANIMALS),
    "fruit": ("{s}'s favourite fruit is the {v}.", "What is {s}'s favourite fruit?",
              "What is the favourite fruit of the best friend of {s}?", FRUITS),
}
FRIEND = "{s}'s best friend is {v}."


def fact_text(fact: dict[str, str]) -> str:
    template = FRIEND if fact["relation"] == "friend" else RELATIONS[fact["relation"]][0]
    return template.format(s=fact["subject"], v=fact["value"])


def _fact(subject: str, relation: str, value: str, supporting: bool = False) -> dict[str, Any]:
    return {"subject": subject, "relation": relation, "value": value, "supporting": supporting}


def _one_hop(rng: random.Random, n_chunks: int, relation: str) -> tuple[str, list[dict[str, Any]]]:
    people = rng.sample(NAMES, n_chunks)
    values = rng.sample(RELATIONS[relation][3], n_chunks)
    asked = people[0]
    facts = [_fact(asked, relation, values[0], supporting=True)]
    other_relations = [r for r in sorted(RELATIONS) if r != relation]
    n_same_person = rng.randint(0, min(len(other_relations), n_chunks - 1))
    for r in rng.sample(other_relations, n_same_person):
        facts.append(_fact(asked, r, rng.choice(RELATIONS[r][3])))
    for person, value in zip(people[1:], values[1:], strict=True):
        if len(facts) == n_chunks:
            break
        facts.append(_fact(person, relation, value))
    return RELATIONS[relation][1].format(s=asked), facts


def _two_hop(rng: random.Random, n_chunks: int, relation: str) -> tuple[str, list[dict[str, Any]]]:
    people = rng.sample(NAMES, 2 * n_chunks)
    values = rng.sample(RELATIONS[relation][3], n_chunks)
    asked, friend = people[0], people[1]
    facts = [_fact(asked, "friend", friend, supporting=True), _fact(friend, relation, values[0], supporting=True)]
    lures = [_fact(asked, relation, values[1])]
    spare = iter(people[2:])
    for value in values[2:]:
        if rng.random() < 0.5:
            lures.append(_fact(next(spare), "friend", next(spare)))
        else:
            lures.append(_fact(next(spare), relation, value))
    facts += lures[: n_chunks - 2]
    return RELATIONS[relation][2].format(s=asked), facts


class SyntheticEvidence(SyntheticLoader):
    """Evidence chunks about several people; one or two of them answer the question."""

    facets: ClassVar[tuple[str, ...]] = ("evidence_chunk_order",)
    set_name: ClassVar[str] = "synthetic_evidence"

    def draw(self, rng: random.Random) -> Draft:
        relation = rng.choice(sorted(RELATIONS))
        n_chunks = rng.randint(3, 6)
        two_hop = rng.random() < TWO_HOP_RATE
        question, facts = (_two_hop if two_hop else _one_hop)(rng, n_chunks, relation)
        rng.shuffle(facts)
        gold = next(f["value"] for f in facts if f["supporting"] and f["relation"] == relation)
        return Draft("two_hop" if two_hop else "one_hop", {"question": question, "facts": facts, "gold": gold})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        components = tuple(
            Component(id=f"chunk-{i}", kind=ComponentKind.TEXT_CHUNK, text=fact_text(f),
                      metadata={"supporting": f["supporting"], "answer": f["value"]})
            for i, f in enumerate(draft.content["facts"]))
        return self.make(item_id=item_id, question=draft.content["question"], components=components,
                         answer_type=AnswerType.FREE, gold_answer=draft.content["gold"], metadata=meta)
