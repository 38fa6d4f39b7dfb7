"""MuSiQue (dgslibisey/MuSiQue, answerable, validation = `musique_ans_v1.0_dev.jsonl`): 3-6 paragraphs.

Kept paragraphs: every supporting one, then distractors in upstream order, up to `max_paragraphs`. The
`evidence` switch (`hotpotqa.Evidence`) sets the display order: supporting first, as the reference
(`reference`, default), or upstream order (`idx`, `gold_first`). Gold: `answer` plus `answer_aliases`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from facet_probe.core.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.datasets.hotpotqa import Evidence, ParagraphLoader
from facet_probe.datasets.hub import Candidate, Upstream, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

SPLIT_FILES = {"validation": "musique_ans_v1.0_dev.jsonl", "train": "musique_ans_v1.0_train.jsonl"}


def supporting_first(row: dict[str, Any], max_paragraphs: int = 6) -> list[dict[str, Any]]:
    """The reference's paragraphs: all supporting, then distractors, capped, in that order; empty ones dropped."""
    paragraphs = list(row["paragraphs"])
    gold = [p for p in paragraphs if p.get("is_supporting")]
    distractors = [p for p in paragraphs if not p.get("is_supporting")]
    return [p for p in (gold + distractors)[:max_paragraphs] if str(p.get("paragraph_text") or "").strip()]


def gold_kept(row: dict[str, Any], max_paragraphs: int = 6) -> list[dict[str, Any]]:
    """The kept paragraphs in upstream order: all supporting, then distractors, capped (`gold_first`)."""
    paragraphs = list(row["paragraphs"])
    gold = [p for p in paragraphs if p.get("is_supporting")]
    distractors = [p for p in paragraphs if not p.get("is_supporting")]
    kept = gold + distractors[: max(0, max_paragraphs - len(gold))]
    return sorted(kept, key=paragraphs.index)


def select_paragraphs(
    row: dict[str, Any], max_paragraphs: int = 6, evidence: Evidence = Evidence.REFERENCE
) -> list[dict[str, Any]]:
    """The shown paragraphs, in display order, under the `evidence` switch."""
    pick = gold_kept if evidence is Evidence.GOLD_FIRST else supporting_first
    return pick(row, max_paragraphs)


def eligible(
    row: dict[str, Any], min_paragraphs: int = 3, max_paragraphs: int = 6, evidence: Evidence = Evidence.REFERENCE,
    as_reference: bool = False,
) -> bool:
    """Answerable with an answer, and `min_paragraphs` or more shown; `gold_first` also needs 1-6 supporting
    paragraphs and at most `max_paragraphs` shown (the reference checks only the shown count: `as_reference`)."""
    if not as_reference and (row.get("answerable") is False or not str(row.get("answer") or "").strip()):
        return False
    kept = select_paragraphs(row, max_paragraphs, evidence)
    if evidence is Evidence.REFERENCE:
        return len(kept) >= min_paragraphs
    n_gold = sum(1 for p in row["paragraphs"] if p.get("is_supporting"))
    return 0 < n_gold <= max_paragraphs and min_paragraphs <= len(kept) <= max_paragraphs


def unusable(row: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None (the reference keeps it)."""
    return None if str(row.get("question") or "").strip() else "the question is empty"


def title_of(paragraph: dict[str, Any]) -> str | None:
    """A paragraph's title as the reference shows it (`str` of the field; none when missing or empty)."""
    return str(paragraph.get("title", "")) or None


def row_to_item(
    row: dict[str, Any],
    dataset: str = "musique",
    max_paragraphs: int = 6,
    evidence: Evidence = Evidence.REFERENCE,
    as_reference: bool = False,
) -> Item:
    kept = select_paragraphs(row, max_paragraphs, evidence)
    components = tuple(
        Component(
            id=f"p{p['idx']}",
            kind=ComponentKind.TEXT_CHUNK,
            title=title_of(p),
            text=str(p["paragraph_text"]),
            metadata={"supporting": bool(p.get("is_supporting"))},
        )
        for p in kept
    )
    hops = len(row.get("question_decomposition") or [])
    n_gold = sum(1 for p in row["paragraphs"] if p.get("is_supporting"))
    n_shown = sum(1 for p in kept if p.get("is_supporting"))
    return make_item(
        item_id=f"{dataset}::{row['id']}",
        dataset=dataset,
        question=row["question"],
        components=components,
        gold_answer=str(row.get("answer") or ""),
        answer_aliases=tuple(row.get("answer_aliases") or ()),
        answer_type=AnswerType.FREE,
        metadata={
            "hops": hops,
            "n_context": len(row["paragraphs"]),
            "gold_in_evidence": 0 < n_gold == n_shown,
            "n_supporting_shown": n_shown,
            **({AS_REFERENCE: True} if as_reference else {}),
        },
    )


class MuSiQue(ParagraphLoader):
    """MuSiQue-Ans validation (the dev file) as evidence chunks."""

    facets = ("evidence_chunk_order",)
    source = "dgslibisey/MuSiQue"
    license = "CC BY 4.0"
    conversion_version: ClassVar[int] = 3
    reference = ReferenceSelection("musique", Draw.BUFFER, 200, seed=43, multiplier=2)

    def __init__(self, name: str = "musique", split: str = "validation", **rest) -> None:
        super().__init__(name, split, **rest)
        if split not in SPLIT_FILES:
            raise ValueError(f"dataset {name}: split must be one of {sorted(SPLIT_FILES)}, got {split!r}")

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (SPLIT_FILES[self.split],))

    def rows(self) -> Iterator[dict[str, Any]]:
        return read_jsonl(self.root / SPLIT_FILES[self.split])

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if not eligible(row, self.min_paragraphs, self.max_paragraphs, self.evidence, self.as_reference) \
                or self.skip(unusable(row)):
            return None
        return Candidate(f"{self.name}::{row['id']}", row)

    def build(self, candidate: Candidate) -> Item:
        return row_to_item(candidate.row, self.name, self.max_paragraphs, self.evidence, self.as_reference)
