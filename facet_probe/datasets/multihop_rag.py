"""MultiHop-RAG (yixuantt/MultiHopRAG, `MultiHopRAG.json`): each query's evidence list as ranked documents.

Items are identified by their position in `MultiHopRAG.json` (the file has no ids). Documents keep
the evidence order of the file (title = article title, else its `source`; text = the evidence fact; an
evidence item without a fact is not shown); all are supporting. `sampling: reference` builds as the
reference runner does: the first `max_docs` evidence items, an empty answer kept (docs/compatibility.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from facet_probe.core.items import (
    AS_REFERENCE,
    AnswerType,
    Component,
    ComponentKind,
    Item,
    ItemError,
    make_item,
)
from facet_probe.datasets.hub import Candidate, Upstream, UpstreamLoader, read_json
from facet_probe.datasets.reference_sampling import Draw, RawId, ReferenceSelection

QUERIES = "MultiHopRAG.json"
DOC_FIELDS = ("source", "author", "category", "published_at", "url")


def evidence_list(row: dict[str, Any]) -> list[Any]:
    """The row's evidence items (a JSON-encoded list is decoded, as the reference does; unreadable: none)."""
    evidence = row.get("evidence_list") or []
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence)
        except json.JSONDecodeError:
            return []
    return list(evidence) if isinstance(evidence, list) else []


def documents(row: dict[str, Any], cap: int | None = None) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(evidence index, title, text, evidence) of the evidence items with a fact, among the first `cap`:
    the reference's rule (title, else source; fact, else body or snippet; a bare string is a fact)."""
    docs = []
    for i, ev in enumerate(evidence_list(row)[:cap]):
        if isinstance(ev, dict):
            title = ev.get("title") or ev.get("source") or ""
            body = ev.get("fact") or ev.get("body") or ev.get("snippet") or ""
            if body:
                docs.append((i, str(title), str(body), ev))
        elif isinstance(ev, str) and ev.strip():
            docs.append((i, "", ev.strip(), {}))
    return docs


def eligible(row: dict[str, Any], min_docs: int = 2, max_docs: int = 6, as_reference: bool = False) -> bool:
    """`min_docs`-`max_docs` evidence items with a fact and a non-empty answer; as the reference: `min_docs`
    or more with a fact among the first `max_docs`, any answer."""
    if as_reference:
        return len(documents(row, max_docs)) >= min_docs
    return bool(str(row.get("answer") or "").strip()) and min_docs <= len(documents(row)) <= max_docs


def unusable(row: dict[str, Any], max_docs: int | None = None) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None."""
    if not str(row.get("query") or "").strip():
        return "the query is empty"
    if any(not text.strip() for _, _, text, _ in documents(row, max_docs)):
        return "an evidence fact is blank (spaces only)"
    return None


def row_to_item(index: int, row: dict[str, Any], dataset: str = "multihop_rag", cap: int | None = None,
                as_reference: bool = False) -> Item:
    """The query with its documents (the first `cap` evidence items with a fact)."""
    components = tuple(
        Component(
            id=f"d{i}",
            kind=ComponentKind.DOCUMENT,
            title=title or None,
            text=text,
            metadata={"supporting": True, **{k: ev.get(k) for k in DOC_FIELDS}},
        )
        for i, title, text, ev in documents(row, cap)
    )
    answer = row.get("answer")
    return make_item(
        item_id=f"{dataset}::{index}",
        dataset=dataset,
        question=str(row["query"]),
        components=components,
        gold_answer="" if answer is None else str(answer),
        answer_type=AnswerType.FREE,
        metadata={"question_type": row.get("question_type"), **({AS_REFERENCE: True} if as_reference else {})},
    )


class MultiHopRAG(UpstreamLoader):
    """MultiHop-RAG queries with 2-6 evidence documents."""

    facets = ("document_rank_order",)
    source = "yixuantt/MultiHopRAG"
    license = "ODC-BY"
    upstream = Upstream(source, (QUERIES,))
    conversion_version: ClassVar[int] = 2
    reference = ReferenceSelection("multihop_rag", Draw.BUFFER, 171, seed=44, multiplier=3,
                                   raw_id=RawId.BUFFER_INDEX)

    def __init__(self, name: str = "multihop_rag", min_docs: int = 2, max_docs: int = 6, **rest) -> None:
        super().__init__(name, **rest)
        self.min_docs, self.max_docs = min_docs, max_docs

    @property
    def cap(self) -> int | None:
        """How many evidence items are read: the first `max_docs` as the reference; all otherwise (a query
        with more is not eligible)."""
        return self.max_docs if self.as_reference else None

    def rows(self) -> Iterator[dict[str, Any]]:
        rows = read_json(self.root / QUERIES)
        if not isinstance(rows, list):
            raise ItemError(
                f"{self.root / QUERIES}: expected a JSON list of queries, got {type(rows).__name__}"
            )
        return ({"index": index, **row} for index, row in enumerate(rows))

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if not eligible(row, self.min_docs, self.max_docs, self.as_reference) or self.skip(unusable(row, self.cap)):
            return None
        return Candidate(f"{self.name}::{row['index']}", row)

    def build(self, candidate: Candidate) -> Item:
        row = dict(candidate.row)
        return row_to_item(row.pop("index"), row, self.name, self.cap, self.as_reference)
