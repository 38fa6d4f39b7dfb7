"""CommonsenseQA (tau/commonsense_qa, validation): 5-option MCQ for option_order; gold is `answerKey`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Item, make_item
from facet_probe.datasets.hub import Candidate, Upstream, UpstreamLoader, iter_parquet
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

COLUMNS = ("id", "question", "question_concept", "choices", "answerKey")


def eligible(row: dict[str, Any]) -> bool:
    """The answer key is one of the choice labels (the test split has no key)."""
    return bool(row.get("answerKey")) and row["answerKey"] in (row.get("choices") or {}).get("label", [])


def unusable(row: dict[str, Any], as_reference: bool = False) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None. The reference keeps an empty
    choice; it also keeps an empty question and a key past the texts, which no item can hold."""
    labels, texts = row["choices"]["label"], list(row["choices"].get("text") or [])
    if not str(row.get("question") or "").strip():
        return "the question is empty"
    if labels.index(row["answerKey"]) >= len(texts):
        return "the answer key has no choice text"
    if not as_reference and any(not str(t).strip() for t in texts):
        return "a choice is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def row_to_item(row: dict[str, Any], dataset: str = "commonsense_qa", as_reference: bool = False) -> Item:
    labels, texts = row["choices"]["label"], row["choices"]["text"]
    return make_item(
        item_id=f"{dataset}::{row['id']}",
        dataset=dataset,
        question=row["question"],
        choices=tuple(str(t) for t in texts),
        gold_index=labels.index(row["answerKey"]),
        answer_type=AnswerType.MCQ,
        metadata={"question_concept": row.get("question_concept"), "labels": list(labels),
                  **({AS_REFERENCE: True} if as_reference else {})},
    )


class CommonsenseQA(UpstreamLoader):
    """CommonsenseQA validation split (the test split has no answers)."""

    facets = ("option_order",)
    source = "tau/commonsense_qa"
    license = "MIT"
    reference = ReferenceSelection("commonsenseqa", Draw.BUFFER, 200, seed=42, multiplier=4)

    def __init__(self, name: str = "commonsense_qa", split: str = "validation", **rest) -> None:
        super().__init__(name, **rest)
        self.split = split

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (f"data/{self.split}-*.parquet",))

    def rows(self) -> Iterator[dict[str, Any]]:
        return iter_parquet(self.files(f"data/{self.split}-*.parquet"), COLUMNS)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if not eligible(row) or self.skip(unusable(row, self.as_reference)):
            return None
        return Candidate(f"{self.name}::{row['id']}", row)

    def build(self, candidate: Candidate) -> Item:
        return row_to_item(candidate.row, self.name, self.as_reference)
