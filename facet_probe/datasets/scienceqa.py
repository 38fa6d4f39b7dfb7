"""ScienceQA (derek-thomas/ScienceQA, test): image questions only, for the adversarial attacks.

The image (and the `hint` context, when present) are fixed context; `choices` with the integer
`answer` make the MCQ. The file has no question ids: items are `scienceqa::<split>-<row>`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from facet_probe.datasets.hub import (
    Candidate,
    Upstream,
    UpstreamLoader,
    fetch_columns,
    hf_image,
    iter_parquet,
    leaf_path,
)
from facet_probe.items import AnswerType, Component, ComponentKind, Item, make_item

COLUMNS = (
    "question",
    "choices",
    "answer",
    "hint",
    "task",
    "grade",
    "subject",
    "topic",
    "category",
    "skill",
    "lecture",
    "solution",
)


def eligible(row: dict[str, Any]) -> bool:
    """An image, >= 2 choices, and the answer index among them."""
    choices = row.get("choices") or []
    answer = row.get("answer")
    return (
        row.get("image") is not None
        and len(choices) >= 2
        and answer is not None
        and 0 <= int(answer) < len(choices)
    )


def row_to_item(row: dict[str, Any], raw_id: str, dataset: str = "scienceqa") -> Item:
    item_id = f"{dataset}::{raw_id}"
    fixed = [Component(id="image", kind=ComponentKind.IMAGE, image=hf_image(row["image"], item_id))]
    if str(row.get("hint") or "").strip():
        fixed.append(
            Component(id="context", kind=ComponentKind.TEXT_CHUNK, title="Context", text=row["hint"])
        )
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=row["question"],
        fixed=tuple(fixed),
        choices=tuple(str(c) for c in row["choices"]),
        gold_index=int(row["answer"]),
        answer_type=AnswerType.MCQ,
        metadata={
            k: row.get(k)
            for k in ("task", "grade", "subject", "topic", "category", "skill", "lecture", "solution")
        },
    )


class ScienceQA(UpstreamLoader):
    """ScienceQA questions that have an image."""

    facets = ("option_order",)
    source = "derek-thomas/ScienceQA"
    license = "CC BY-NC-SA 4.0 (non-commercial)"

    def __init__(self, name: str = "scienceqa", split: str = "test", **rest) -> None:
        super().__init__(name, **rest)
        self.split = split

    @property
    def pattern(self) -> str:
        return f"data/{self.split}-*.parquet"

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (self.pattern,))

    def candidates(self) -> Iterator[Candidate]:
        files = self.files(self.pattern)
        for index, row in enumerate(iter_parquet(files, (*COLUMNS, leaf_path(files[0], "image", "path")))):
            if eligible(row):
                yield Candidate(
                    f"{self.name}::{self.split}-{index}", {**row, "raw_id": f"{self.split}-{index}"}
                )

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        return [row_to_item(row, row["raw_id"], self.name) for row in fetch_columns(candidates, ("image",))]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
