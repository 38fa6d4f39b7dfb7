"""HotpotQA (hotpotqa/hotpot_qa, distractor, validation): gold + distractor paragraphs, 3-6 per item.

One module, two datasets: `hotpotqa` orders the paragraphs as evidence chunks (evidence_chunk_order),
`hotpotqa_docs` presents them as ranked documents with titles (document_rank_order); item ids differ
by the dataset prefix. Kept paragraphs: every supporting one, then distractors in upstream order up to
`max_paragraphs`, shown in their upstream order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from facet_probe.datasets.hub import Candidate, Upstream, UpstreamLoader, iter_parquet
from facet_probe.items import AnswerType, Component, ComponentKind, Item, make_item

COLUMNS = ("id", "question", "answer", "type", "level", "supporting_facts", "context")


def select_paragraphs(row: dict[str, Any], max_paragraphs: int = 6) -> list[int]:
    """Indices (upstream order) of the kept paragraphs: all supporting, then distractors, capped."""
    titles = list(row["context"]["title"])
    supporting = set(row["supporting_facts"]["title"])
    gold = [i for i, t in enumerate(titles) if t in supporting]
    distractors = [i for i, t in enumerate(titles) if t not in supporting]
    room = max(0, max_paragraphs - len(gold))
    return sorted(gold + distractors[:room])


def eligible(row: dict[str, Any], min_paragraphs: int = 3, max_paragraphs: int = 6) -> bool:
    """Every supporting title is among the paragraphs and the kept set has 3-6 paragraphs."""
    titles = set(row["context"]["title"])
    supporting = set(row["supporting_facts"]["title"])
    if not supporting or not supporting <= titles:
        return False
    kept = select_paragraphs(row, max_paragraphs)
    return min_paragraphs <= len(kept) <= max_paragraphs and len(supporting) <= max_paragraphs


def row_to_item(row: dict[str, Any], dataset: str, kind: ComponentKind, max_paragraphs: int = 6) -> Item:
    titles, sentences = row["context"]["title"], row["context"]["sentences"]
    facts: dict[str, list[int]] = {}
    for title, sent in zip(row["supporting_facts"]["title"], row["supporting_facts"]["sent_id"], strict=True):
        facts.setdefault(title, []).append(int(sent))
    components = tuple(
        Component(
            id=f"p{i}",
            kind=kind,
            title=titles[i],
            text="".join(sentences[i]).strip(),
            metadata={"supporting": titles[i] in facts, "supporting_sentences": facts.get(titles[i], [])},
        )
        for i in select_paragraphs(row, max_paragraphs)
    )
    return make_item(
        item_id=f"{dataset}::{row['id']}",
        dataset=dataset,
        question=row["question"],
        components=components,
        gold_answer=row["answer"],
        answer_type=AnswerType.FREE,
        metadata={"type": row.get("type"), "level": row.get("level"), "n_context": len(titles)},
    )


class HotpotQA(UpstreamLoader):
    """HotpotQA distractor validation as evidence chunks."""

    facets: ClassVar[tuple[str, ...]] = ("evidence_chunk_order",)
    kind: ClassVar[ComponentKind] = ComponentKind.TEXT_CHUNK
    source = "hotpotqa/hotpot_qa"
    license = "CC BY-SA 4.0"

    def __init__(
        self,
        name: str = "hotpotqa",
        split: str = "validation",
        setting: str = "distractor",
        min_paragraphs: int = 3,
        max_paragraphs: int = 6,
        **rest,
    ) -> None:
        super().__init__(name, **rest)
        self.split, self.setting = split, setting
        self.min_paragraphs, self.max_paragraphs = min_paragraphs, max_paragraphs

    @property
    def pattern(self) -> str:
        return f"{self.setting}/{self.split}-*.parquet"

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (self.pattern,))

    def candidates(self) -> Iterator[Candidate]:
        for row in iter_parquet(self.files(self.pattern), COLUMNS):
            if eligible(row, self.min_paragraphs, self.max_paragraphs):
                yield Candidate(f"{self.name}::{row['id']}", row)

    def build(self, candidate: Candidate) -> Item:
        return row_to_item(candidate.row, self.name, self.kind, self.max_paragraphs)


class HotpotQADocs(HotpotQA):
    """The same paragraphs as titled, ranked documents."""

    facets: ClassVar[tuple[str, ...]] = ("document_rank_order",)
    kind: ClassVar[ComponentKind] = ComponentKind.DOCUMENT
    data_folder: ClassVar[str | None] = "hotpotqa"  # the same upstream files as `hotpotqa`

    def __init__(self, name: str = "hotpotqa_docs", **rest) -> None:
        super().__init__(name, **rest)
