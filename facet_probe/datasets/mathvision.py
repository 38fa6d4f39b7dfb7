"""MathVision (MathLLMs/MathVision, testmini): figure MCQ for option_order; the figure is fixed context."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.datasets.hub import (
    Candidate,
    Upstream,
    UpstreamLoader,
    fetch_columns,
    hf_image,
    iter_parquet,
    letter_index,
)
from facet_probe.datasets.image_set import decodable
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

COLUMNS = ("id", "question", "options", "image", "answer", "level", "subject")
IMAGE_COLUMN = "decoded_image"
_PLACEHOLDER = re.compile(r"<image\d*>")


def letter_only(options: Sequence[str]) -> bool:
    """Options that are just their own labels ("A".."E"): the real options are drawn in the figure."""
    return all(str(o).strip().strip("()").upper() == chr(65 + i) for i, o in enumerate(options))


def eligible(row: dict[str, Any], min_options: int = 3, skip_letter_options: bool = True) -> bool:
    """>= `min_options` options, a single-letter answer among them, options that are not bare letters."""
    options = list(row.get("options") or [])
    if len(options) < min_options or letter_index(row.get("answer"), len(options)) is None:
        return False
    return not (skip_letter_options and letter_only(options))


def reference_eligible(row: dict[str, Any]) -> bool:
    """The reference's filter: >= 3 options (bare letters too) and an answer that is one letter among them."""
    options = list(row.get("options") or [])
    answer = str(row.get("answer", "")).strip().upper()
    return len(options) >= 3 and len(answer) == 1 and "A" <= answer <= "Z" and ord(answer) - 65 < len(options)


def unusable(row: dict[str, Any], as_reference: bool = False) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None. The reference keeps an empty option
    (`dataset.sampling=reference` does too); `stable` skips it."""
    if not (str(row["question"]) if as_reference else clean_question(row["question"])).strip():
        return "the question is empty"
    if not as_reference and any(not str(o).strip() for o in row["options"]):
        return "an option is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def clean_question(text: str) -> str:
    """The question without `<image1>` placeholders (the figure is shown as fixed context)."""
    return re.sub(r"[ \t]+", " ", _PLACEHOLDER.sub("", text)).strip()


def row_to_item(row: dict[str, Any], dataset: str = "mathvision", as_reference: bool = False) -> Item:
    """The item of an eligible row; as the reference: the question as stored, and no figure when the row's
    figure cannot be decoded (the reference then asks without it)."""
    item_id = f"{dataset}::{row['id']}"
    figure = () if as_reference and not decodable(row[IMAGE_COLUMN]) else (Component(
        id="figure",
        kind=ComponentKind.IMAGE,
        image=hf_image(row[IMAGE_COLUMN], item_id, "figure"),
        metadata={"upstream_path": row.get("image")},
    ),)
    options = tuple(str(o) for o in row["options"])
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=str(row["question"]) if as_reference else clean_question(row["question"]),
        fixed=figure,
        choices=options,
        gold_index=letter_index(row["answer"], len(options)),
        answer_type=AnswerType.MCQ,
        metadata={"level": row.get("level"), "subject": row.get("subject"), "question_raw": row["question"],
                  **({AS_REFERENCE: True} if as_reference else {})},
    )


class MathVision(UpstreamLoader):
    """MathVision testmini, MCQ items with >= 3 real (non-letter) options and a single-letter answer."""

    facets = ("option_order",)
    source = "MathLLMs/MathVision"
    license = "MIT"

    def __init__(
        self,
        name: str = "mathvision",
        split: str = "testmini",
        min_options: int = 3,
        skip_letter_options: bool = True,
        **rest,
    ) -> None:
        super().__init__(name, **rest)
        self.split = split
        self.min_options = min_options
        self.skip_letter_options = skip_letter_options

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (f"data/{self.split}-*.parquet",))

    reference = ReferenceSelection("mathvision", Draw.UPSTREAM, 190, id_fields=("id", "question_id"))

    def candidates(self) -> Iterator[Candidate]:
        for row in iter_parquet(self.files(f"data/{self.split}-*.parquet"), COLUMNS):
            passes = reference_eligible(row) if self.as_reference else eligible(
                row, self.min_options, self.skip_letter_options)
            if passes and not self.skip(unusable(row, self.as_reference)):
                yield Candidate(f"{self.name}::{row['id']}", row)

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        return [row_to_item(row, self.name, self.as_reference)
                for row in fetch_columns(candidates, (IMAGE_COLUMN,))]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
