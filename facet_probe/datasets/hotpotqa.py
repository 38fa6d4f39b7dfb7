"""HotpotQA (hotpotqa/hotpot_qa, distractor, validation): context paragraphs, 3-6 per item.

One module, two datasets: `hotpotqa` orders the paragraphs as evidence chunks (evidence_chunk_order),
`hotpotqa_docs` presents them as ranked documents with titles (document_rank_order); item ids differ
by the dataset prefix. Which paragraphs are kept is the `evidence` switch (`Evidence`): the reference's
construction by default (gold not guaranteed for `hotpotqa`), or every supporting one kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any, ClassVar

from facet_probe.core.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.datasets.hub import Candidate, Upstream, UpstreamLoader, iter_parquet
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

COLUMNS = ("id", "question", "answer", "type", "level", "supporting_facts", "context")


class Evidence(StrEnum):
    """How an evidence dataset picks the paragraphs it shows (docs/datasets.md, docs/compatibility.md)."""

    REFERENCE = "reference"  # the reference runner's construction: items are not filtered to gold evidence
    GOLD_FIRST = "gold_first"  # every supporting paragraph kept first, then distractors, shown in upstream order


def evidence_of(name: str, value: Evidence | str) -> Evidence:
    """The `evidence` option as an `Evidence`, or one clear error naming the allowed values."""
    try:
        return Evidence(value)
    except ValueError:
        allowed = [e.value for e in Evidence]
        raise ValueError(f"dataset {name}: evidence must be one of {allowed}, got {value!r}") from None


class ParagraphLoader(UpstreamLoader):
    """A loader of a split's rows shown as `min_paragraphs`-`max_paragraphs` paragraphs, picked by the
    `evidence` switch (HotpotQA, MuSiQue)."""

    def __init__(self, name: str, split: str = "validation", min_paragraphs: int = 3, max_paragraphs: int = 6,
                 evidence: Evidence | str = Evidence.REFERENCE, **rest) -> None:
        super().__init__(name, **rest)
        self.split = split
        self.min_paragraphs, self.max_paragraphs = min_paragraphs, max_paragraphs
        self.evidence = evidence_of(name, evidence)


def paragraph_text(sentences: list[str]) -> str:
    """A paragraph's sentences joined with one space, as the reference joins them (the upstream sentences
    already start with a space, so the joined text has two between sentences: the reference's bytes)."""
    return " ".join(str(s) for s in sentences).strip()


def unusable(row: dict[str, Any], as_reference: bool = False) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None; the reference keeps an empty
    answer, not an empty question."""
    if not str(row.get("question") or "").strip():
        return "the question is empty"
    if not as_reference and not str(row.get("answer") or "").strip():
        return "the answer is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def first_paragraphs(row: dict[str, Any], max_paragraphs: int = 6) -> list[int]:
    """The reference's evidence chunks: the first `max_paragraphs` context paragraphs with text, in order."""
    sentences = row["context"]["sentences"][:max_paragraphs]
    return [i for i, sent in enumerate(sentences) if paragraph_text(sent)]


def supporting_first(row: dict[str, Any], max_paragraphs: int = 6) -> list[int]:
    """The reference's ranked documents: every supporting paragraph, then others until `max_paragraphs`."""
    titles, sentences = row["context"]["title"], row["context"]["sentences"]
    supporting = set(row["supporting_facts"]["title"])
    with_text = [i for i in range(len(titles)) if paragraph_text(sentences[i])]
    ranked = [i for i in with_text if titles[i] in supporting]
    others = [i for i in with_text if titles[i] not in supporting]
    return ranked + others[: max(0, max_paragraphs - len(ranked))]


def gold_kept(row: dict[str, Any], max_paragraphs: int = 6) -> list[int]:
    """Indices (upstream order) of every supporting paragraph, then distractors, capped (`gold_first`)."""
    titles = list(row["context"]["title"])
    supporting = set(row["supporting_facts"]["title"])
    gold = [i for i, t in enumerate(titles) if t in supporting]
    distractors = [i for i, t in enumerate(titles) if t not in supporting]
    room = max(0, max_paragraphs - len(gold))
    return sorted(gold + distractors[:room])


def gold_kept_eligible(row: dict[str, Any], min_paragraphs: int = 3, max_paragraphs: int = 6) -> bool:
    """`gold_first`: every supporting title is among the paragraphs and the kept set has 3-6 paragraphs."""
    titles = set(row["context"]["title"])
    supporting = set(row["supporting_facts"]["title"])
    if not supporting or not supporting <= titles:
        return False
    kept = gold_kept(row, max_paragraphs)
    return min_paragraphs <= len(kept) <= max_paragraphs and len(supporting) <= max_paragraphs


def row_to_item(row: dict[str, Any], dataset: str, kind: ComponentKind, kept: list[int],
                as_reference: bool = False) -> Item:
    """An item showing the paragraphs `kept` (context indices, in display order)."""
    titles, sentences = row["context"]["title"], row["context"]["sentences"]
    facts: dict[str, list[int]] = {}
    for title, sent in zip(row["supporting_facts"]["title"], row["supporting_facts"]["sent_id"], strict=True):
        facts.setdefault(title, []).append(int(sent))
    components = tuple(
        Component(
            id=f"p{i}",
            kind=kind,
            title=str(titles[i]) or None,
            text=paragraph_text(sentences[i]),
            metadata={"supporting": titles[i] in facts, "supporting_sentences": facts.get(titles[i], [])},
        )
        for i in kept
    )
    shown = {titles[i] for i in kept}
    return make_item(
        item_id=f"{dataset}::{row['id']}",
        dataset=dataset,
        question=row["question"],
        components=components,
        gold_answer=str(row.get("answer") or ""),
        answer_type=AnswerType.FREE,
        metadata={
            **({AS_REFERENCE: True} if as_reference else {}),
            "type": row.get("type"),
            "level": row.get("level"),
            "n_context": len(titles),
            # False: some supporting paragraph is not shown; the gold is kept (the question stays as asked).
            "gold_in_evidence": bool(facts) and set(facts) <= shown,
            "n_supporting_shown": sum(1 for t in facts if t in shown),
        },
    )


class HotpotQA(ParagraphLoader):
    """HotpotQA distractor validation as evidence chunks."""

    facets: ClassVar[tuple[str, ...]] = ("evidence_chunk_order",)
    kind: ClassVar[ComponentKind] = ComponentKind.TEXT_CHUNK
    #: The reference's construction for this view (`evidence: reference`).
    reference_paragraphs: ClassVar[Callable[[dict[str, Any], int], list[int]]] = staticmethod(first_paragraphs)
    source = "hotpotqa/hotpot_qa"
    license = "CC BY-SA 4.0"
    conversion_version: ClassVar[int] = 3
    #: the reference's evidence_chunk_order loader (`hotpotqa/hotpot_qa`, default@refs/convert/parquet)
    reference: ClassVar[ReferenceSelection | None] = ReferenceSelection("hotpotqa", Draw.BUFFER, 199, seed=42,
                                                                        multiplier=2)

    def __init__(self, name: str = "hotpotqa", setting: str = "distractor", **rest) -> None:
        super().__init__(name, **rest)
        self.setting = setting

    @property
    def pattern(self) -> str:
        return f"{self.setting}/{self.split}-*.parquet"

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (self.pattern,))

    def kept(self, row: dict[str, Any]) -> list[int]:
        """The shown paragraphs (context indices, display order) under the `evidence` switch."""
        if self.evidence is Evidence.GOLD_FIRST:
            return gold_kept(row, self.max_paragraphs)
        return type(self).reference_paragraphs(row, self.max_paragraphs)

    def shows_enough(self, row: dict[str, Any]) -> bool:
        """`reference`: at least `min_paragraphs` shown (the reference's only filter); `gold_first`: see
        `gold_kept_eligible`."""
        if self.evidence is Evidence.GOLD_FIRST:
            return gold_kept_eligible(row, self.min_paragraphs, self.max_paragraphs)
        return len(self.kept(row)) >= self.min_paragraphs

    def rows(self) -> Iterator[dict[str, Any]]:
        return iter_parquet(self.files(self.pattern), COLUMNS)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if not self.shows_enough(row) or self.skip(unusable(row, self.as_reference)):
            return None
        return Candidate(f"{self.name}::{row['id']}", row)

    def build(self, candidate: Candidate) -> Item:
        return row_to_item(candidate.row, self.name, self.kind, self.kept(candidate.row), self.as_reference)


class HotpotQADocs(HotpotQA):
    """The paragraphs as titled, ranked documents (reference: supporting ones ranked first)."""

    facets: ClassVar[tuple[str, ...]] = ("document_rank_order",)
    kind: ClassVar[ComponentKind] = ComponentKind.DOCUMENT
    reference_paragraphs: ClassVar[Callable[[dict[str, Any], int], list[int]]] = staticmethod(supporting_first)
    data_folder: ClassVar[str | None] = "hotpotqa"  # the same upstream files as `hotpotqa`
    #: the reference's document_rank_order loader: the same name, so the same ids as `hotpotqa`'s items
    reference: ClassVar[ReferenceSelection | None] = ReferenceSelection("hotpotqa", Draw.BUFFER, 199, seed=49,
                                                                        multiplier=4)

    def __init__(self, name: str = "hotpotqa_docs", **rest) -> None:
        super().__init__(name, **rest)
