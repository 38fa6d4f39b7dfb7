"""MultiHop-RAG (yixuantt/MultiHopRAG, `MultiHopRAG.json`): each query's evidence list as ranked documents.

Items are identified by their position in `MultiHopRAG.json` (the file has no ids). Documents keep
the evidence order of the file (title = article title, text = the evidence fact); all are supporting.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.datasets.hub import Candidate, Upstream, UpstreamLoader, read_json
from facet_probe.datasets.reference_sampling import Draw, RawId, ReferenceSelection
from facet_probe.items import AnswerType, Component, ComponentKind, Item, ItemError, make_item

QUERIES = "MultiHopRAG.json"
DOC_FIELDS = ("source", "author", "category", "published_at", "url")


def eligible(row: dict[str, Any], min_docs: int = 2, max_docs: int = 6) -> bool:
    """A non-empty answer and 2-6 evidence documents with text."""
    evidence = [e for e in row.get("evidence_list") or [] if str(e.get("fact") or "").strip()]
    return bool(str(row.get("answer") or "").strip()) and min_docs <= len(evidence) <= max_docs


def row_to_item(index: int, row: dict[str, Any], dataset: str = "multihop_rag") -> Item:
    components = tuple(
        Component(
            id=f"d{i}",
            kind=ComponentKind.DOCUMENT,
            title=e.get("title") or None,
            text=e["fact"],
            metadata={"supporting": True, **{k: e.get(k) for k in DOC_FIELDS}},
        )
        for i, e in enumerate(row["evidence_list"])
    )
    return make_item(
        item_id=f"{dataset}::{index}",
        dataset=dataset,
        question=row["query"],
        components=components,
        gold_answer=str(row["answer"]),
        answer_type=AnswerType.FREE,
        metadata={"question_type": row.get("question_type")},
    )


class MultiHopRAG(UpstreamLoader):
    """MultiHop-RAG queries with 2-6 evidence documents."""

    facets = ("document_rank_order",)
    source = "yixuantt/MultiHopRAG"
    license = "ODC-BY"
    upstream = Upstream(source, (QUERIES,))
    reference = ReferenceSelection("multihop_rag", Draw.BUFFER, 171, seed=44, multiplier=3,
                                   raw_id=RawId.BUFFER_INDEX)

    def __init__(self, name: str = "multihop_rag", min_docs: int = 2, max_docs: int = 6, **rest) -> None:
        super().__init__(name, **rest)
        self.min_docs, self.max_docs = min_docs, max_docs

    def rows(self) -> Iterator[dict[str, Any]]:
        rows = read_json(self.root / QUERIES)
        if not isinstance(rows, list):
            raise ItemError(
                f"{self.root / QUERIES}: expected a JSON list of queries, got {type(rows).__name__}"
            )
        return ({"index": index, **row} for index, row in enumerate(rows))

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if eligible(row, self.min_docs, self.max_docs):
            return Candidate(f"{self.name}::{row['index']}", row)
        return None

    def build(self, candidate: Candidate) -> Item:
        row = dict(candidate.row)
        return row_to_item(row.pop("index"), row, self.name)
