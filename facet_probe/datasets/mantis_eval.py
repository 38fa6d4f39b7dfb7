"""Mantis-Eval (TIGER-Lab/Mantis-Eval, test): multi-image MCQ for image_set_order (3-6 images).

Images are the orderable components; the options stay fixed. `<image>` placeholders are removed from
the displayed question (the raw text is kept for the position-reference screen, whose verdict is in
`metadata["position_screen"]`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Item, make_item
from facet_probe.datasets.hub import Candidate, Upstream, fetch_columns, iter_parquet, leaf_path, letter_index
from facet_probe.datasets.image_set import ImageSetLoader, image_components
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.datasets.screen import METADATA_KEY, ScreenRules, screen_text

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


# --------------------------------------------------------------------------- as the reference (`sampling: reference`)
def reference_question(raw: object) -> str:
    """The reference's shown question: each `<image>` with the spaces around it becomes one space."""
    return re.sub(r"\s*<image>\s*", " ", str(raw)).strip()


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


def unusable(row: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None."""
    if not display_question(row["question"]):
        return "the question is empty"
    if any(not strip_label(o) for o in row["options"]):
        return "an option is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def row_to_item(row: dict[str, Any], dataset: str = "mantis_eval",
                rules: ScreenRules = ScreenRules.REFERENCE) -> Item:
    """The item of an eligible row; a row carrying `reference_fields` is built as the reference shows it."""
    item_id = f"{dataset}::{row['id']}"
    as_reference = "ref_images" in row
    if as_reference:
        choices, gold, shown = tuple(row["ref_choices"]), row["ref_gold"], row["ref_images"]
        question = reference_question(row["question"])
    else:
        choices, shown, question = tuple(strip_label(o) for o in row["options"]), row["images"], display_question(
            row["question"])
        gold = letter_index(row["answer"], len(choices))
    images = image_components(shown, item_id, "image")
    screen = screen_text(row["question"], [str(o) for o in row["options"]], rules=rules)
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=question,
        components=images,
        choices=choices,
        gold_index=gold,
        answer_type=AnswerType.MCQ,
        metadata={
            **({AS_REFERENCE: True} if as_reference else {}),
            "question_raw": row["question"],
            "options_raw": [str(o) for o in row["options"]],
            "data_source": row.get("data_source"),
            "category": row.get("category"),
            METADATA_KEY: screen.to_metadata(),
        },
    )


class MantisEval(ImageSetLoader):
    """Mantis-Eval multi-choice items with 3-6 images, screened for position references."""

    source = "TIGER-Lab/Mantis-Eval"
    license = "Apache-2.0"
    pattern = "mantis_eval/test-*.parquet"
    upstream = Upstream(source, (pattern,))
    reference = ReferenceSelection("mantis_eval", Draw.BUFFER, 18, seed=47, multiplier=4)

    def __init__(self, name: str = "mantis_eval", min_images: int = 3, max_images: int = 6, **rest) -> None:
        super().__init__(name, min_images, max_images, **rest)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row; the image bytes only as the reference (it drops an image it cannot decode)."""
        files = self.files(self.pattern)
        if self.as_reference:
            return iter_parquet(files, (*COLUMNS, "images"))
        light = (*COLUMNS, leaf_path(files[0], "images", "path"))  # image count without the bytes
        return iter_parquet(files, light)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        item_id = f"{self.name}::{row['id']}"
        if self.as_reference:
            return self.reference_candidate(item_id, row, row.get("images") or [], row.get("options") or [],
                                            row.get("answer"), reference_question(row.get("question")))
        if not eligible(row, self.min_images, self.max_images) or self.skip(unusable(row)):
            return None
        return Candidate(item_id, row)

    def reference_admits(self, row: dict[str, Any]) -> bool:
        """The reference buffers only multi-choice rows with >= 3 images (then shuffles, then filters)."""
        return row.get("question_type") == "multi-choice" and len(row.get("images") or []) >= 3

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        rows = [c.row for c in candidates] if self.as_reference else fetch_columns(candidates, ("images",))
        return [row_to_item(row, self.name, self.screen.rules) for row in rows]
