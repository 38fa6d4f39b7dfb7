"""Mantis-Eval (TIGER-Lab/Mantis-Eval, test): multi-image MCQ for image_set_order (3-6 images).

Images are the orderable components; the options stay fixed. `<image>` placeholders are removed from
the displayed question (the raw text is kept for the position-reference screen, whose verdict is in
`metadata["position_screen"]`).
"""

from __future__ import annotations

import re
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
    letter_index,
)
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.datasets.screen import METADATA_KEY, ScreenRules, ScreenSettings, screen_text
from facet_probe.items import AnswerType, Component, ComponentKind, Item, make_item

COLUMNS = ("id", "question_type", "question", "options", "answer", "data_source", "category")
_PREFIX = re.compile(r"^\s*\(?[A-Z]\)?[.:)]?\s+")


def strip_label(option: str) -> str:
    """ "(A) a dog" -> "a dog" (the facet adds its own letters)."""
    return _PREFIX.sub("", str(option), count=1).strip()


_LABEL_LINE = re.compile(
    r"^[ \t]*(?:image|picture)[ \t]*\d+[ \t]*:[ \t]*<image>[ \t]*\n?", re.IGNORECASE | re.MULTILINE
)


def display_question(raw: str) -> str:
    """The question without "Image k: <image>" label lines and leading/trailing placeholder blocks (the
    facet shows and labels the images itself); a placeholder inside the text becomes "[image]"."""
    text = _LABEL_LINE.sub("", raw)
    text = re.sub(r"(?:\s*<image>)+\s*$", "", re.sub(r"^(?:\s*<image>)+\s*", "", text))
    return re.sub(r"[ \t]{2,}", " ", text.replace("<image>", "[image]")).strip()


def eligible(row: dict[str, Any], min_images: int = 3, max_images: int = 6) -> bool:
    """Multiple choice, 3-6 images, a letter answer among >= 2 options."""
    n_images = len(row.get("images") or [])
    options = row.get("options") or []
    return (
        row.get("question_type") == "multi-choice"
        and min_images <= n_images <= max_images
        and len(options) >= 2
        and letter_index(row.get("answer"), len(options)) is not None
    )


def row_to_item(row: dict[str, Any], dataset: str = "mantis_eval",
                rules: ScreenRules = ScreenRules.REFERENCE) -> Item:
    item_id = f"{dataset}::{row['id']}"
    choices = tuple(strip_label(o) for o in row["options"])
    images = tuple(
        Component(id=f"img{i}", kind=ComponentKind.IMAGE, image=hf_image(v, item_id, f"image {i + 1}"))
        for i, v in enumerate(row["images"])
    )
    screen = screen_text(row["question"], [str(o) for o in row["options"]], rules=rules)
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=display_question(row["question"]),
        components=images,
        choices=choices,
        gold_index=letter_index(row["answer"], len(choices)),
        answer_type=AnswerType.MCQ,
        metadata={
            "question_raw": row["question"],
            "options_raw": [str(o) for o in row["options"]],
            "data_source": row.get("data_source"),
            "category": row.get("category"),
            METADATA_KEY: screen.to_metadata(),
        },
    )


class MantisEval(UpstreamLoader):
    """Mantis-Eval multi-choice items with 3-6 images, screened for position references."""

    facets = ("image_set_order",)
    source = "TIGER-Lab/Mantis-Eval"
    license = "Apache-2.0"
    pattern = "mantis_eval/test-*.parquet"
    upstream = Upstream(source, (pattern,))
    reference = ReferenceSelection("mantis_eval", Draw.BUFFER, 18, seed=47, multiplier=4)

    def __init__(self, name: str = "mantis_eval", min_images: int = 3, max_images: int = 6,
                 screen_rules: ScreenRules | str = ScreenRules.REFERENCE, screen_csv: str | None = None,
                 **rest) -> None:
        super().__init__(name, **rest)
        self.screen = ScreenSettings.of(name, screen_rules, screen_csv)
        self.min_images, self.max_images = min_images, max_images

    def rows(self) -> Iterator[dict[str, Any]]:
        files = self.files(self.pattern)
        light = (*COLUMNS, leaf_path(files[0], "images", "path"))  # image count without the bytes
        return iter_parquet(files, light)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if eligible(row, self.min_images, self.max_images):
            return Candidate(f"{self.name}::{row['id']}", row)
        return None

    def reference_admits(self, row: dict[str, Any]) -> bool:
        """The reference buffers only multi-choice rows with >= 3 images (then shuffles, then filters)."""
        return row.get("question_type") == "multi-choice" and len(row.get("images") or []) >= 3

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        return [row_to_item(row, self.name, self.screen.rules) for row in fetch_columns(candidates, ("images",))]

    def load(self, limit: int | None = None) -> list[Item]:
        return self.screen.apply(super().load(limit))

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
