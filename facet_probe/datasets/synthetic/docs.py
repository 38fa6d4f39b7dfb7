"""synthetic_docs: 2-6 short titled documents, one per person, shown as ranked retrieval results, and
a free-form question about one person (document_rank_order).

Each document (title = the person's name) gives a job and a home city; "What is Ana's job?" is
answered by Ana's document alone, and the other documents carry other jobs and cities.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader
from facet_probe.datasets.synthetic.vocab import CITIES, JOBS, NAMES, a

QUESTIONS = {"job": "What is {s}'s job?", "city": "Which city is {s} from?"}


def doc_text(doc: dict[str, str]) -> str:
    return f"{doc['name']} works as {a(doc['job'])}. {doc['name']} is from {doc['city']}."


class SyntheticDocs(SyntheticLoader):
    """Ranked documents about people; exactly one is about the person asked about."""

    facets: ClassVar[tuple[str, ...]] = ("document_rank_order",)
    set_name: ClassVar[str] = "synthetic_docs"

    def draw(self, rng: random.Random) -> Draft:
        n_docs = rng.randint(2, 6)
        docs = [{"name": n, "job": j, "city": c} for n, j, c in
                zip(rng.sample(NAMES, n_docs), rng.sample(JOBS, n_docs), rng.sample(CITIES, n_docs), strict=True)]
        asked = rng.choice(docs)
        field = rng.choice(sorted(QUESTIONS))
        question = QUESTIONS[field].format(s=asked["name"])
        return Draft(field, {"docs": docs, "question": question, "field": field, "asked": asked["name"],
                             "gold": asked[field]})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        content = draft.content
        components = tuple(
            Component(id=f"doc-{i}", kind=ComponentKind.DOCUMENT, title=d["name"], text=doc_text(d),
                      metadata={"supporting": d["name"] == content["asked"], "answer": d[content["field"]]})
            for i, d in enumerate(content["docs"]))
        return self.make(item_id=item_id, question=content["question"], components=components,
                         answer_type=AnswerType.FREE, gold_answer=content["gold"], metadata=meta)
