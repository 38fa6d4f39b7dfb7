"""MMLU-Pro (TIGER-Lab/MMLU-Pro, test): 10-option MCQ for option_order; gold is `answer_index`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Item, make_item
from facet_probe.datasets.hub import Candidate, Upstream, UpstreamLoader, iter_parquet
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

COLUMNS = ("question_id", "question", "options", "answer", "answer_index", "category", "src")


def eligible(row: dict[str, Any], min_options: int = 4, as_reference: bool = False) -> bool:
    """At least `min_options` non-empty options and a gold index among them; as the reference: `min_options`
    options, empty or not, and a gold index."""
    options = [o for o in (row.get("options") or []) if as_reference or str(o).strip()]
    gold = row.get("answer_index")
    return len(options) >= min_options and gold is not None and (as_reference or 0 <= int(gold) < len(row["options"]))


def unusable(row: dict[str, Any], as_reference: bool = False) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None. The reference keeps an empty
    option; it also keeps an empty question and an answer_index past the options, which no item can hold."""
    if not str(row.get("question") or "").strip():
        return "the question is empty"
    if not 0 <= int(row["answer_index"]) < len(row["options"]):
        return "answer_index is not among the options"
    if not as_reference and any(not str(o).strip() for o in row["options"]):
        return "an option is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def row_to_item(row: dict[str, Any], dataset: str = "mmlu_pro", as_reference: bool = False) -> Item:
    return make_item(
        item_id=f"{dataset}::{row['question_id']}",
        dataset=dataset,
        question=row["question"],
        choices=tuple(str(o) for o in row["options"]),
        gold_index=int(row["answer_index"]),
        answer_type=AnswerType.MCQ,
        metadata={"category": row.get("category"), "src": row.get("src"), "answer_letter": row.get("answer"),
                  **({AS_REFERENCE: True} if as_reference else {})},
    )


class MMLUPro(UpstreamLoader):
    """MMLU-Pro test split, items with >= `min_options` options."""

    facets = ("option_order",)
    source = "TIGER-Lab/MMLU-Pro"
    license = "MIT"
    reference = ReferenceSelection("mmlu_pro", Draw.BUFFER, 200, seed=42, multiplier=8, id_fields=("question_id",))

    def __init__(self, name: str = "mmlu_pro", split: str = "test", min_options: int = 4, **rest) -> None:
        super().__init__(name, **rest)
        self.split = split
        self.min_options = min_options

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (f"data/{self.split}-*.parquet",))

    def rows(self) -> Iterator[dict[str, Any]]:
        return iter_parquet(self.files(f"data/{self.split}-*.parquet"), COLUMNS)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if not eligible(row, self.min_options, self.as_reference) or self.skip(unusable(row, self.as_reference)):
            return None
        return Candidate(f"{self.name}::{row['question_id']}", row)

    def build(self, candidate: Candidate) -> Item:
        return row_to_item(candidate.row, self.name, self.as_reference)
