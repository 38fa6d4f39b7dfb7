"""Mantis-Eval (TIGER-Lab/Mantis-Eval, test): multi-image MCQ for image_set_order (3-6 images).

Images are the orderable components; the options stay fixed. `<image>` placeholders are removed from
the displayed question (the raw text is kept for the position-reference screen, whose verdict is in
`metadata["position_screen"]`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
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
from facet_probe.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item

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
_REFERENCE_PREFIX = re.compile(r"^\(?([A-Z])\)?[\.\):\s]\s*(.+)$")
REFERENCE_MAX_IMAGES = 6  #: the reference shows the first 6 decodable images of a row


def reference_choices(options: Sequence[Any]) -> list[str]:
    """The reference's `_strip_choice_prefixes`: "(A) x", "A. x", "A) x", "(A)x" and also "A x" lose the label."""
    return [m.group(2).strip() if (m := _REFERENCE_PREFIX.match(str(o).strip())) else str(o).strip() for o in options]


def reference_letter(answer: Any) -> str | None:
    """The reference's `_letter_from_text`: the first letter of the answer ("(b)", "C: a dog"), in range or not."""
    m = re.match(r"^\(?([A-Z])", str(answer or "").strip().upper())
    return m.group(1) if m else None


def reference_question(raw: str) -> str:
    """The reference's shown question: each `<image>` with the spaces around it becomes one space."""
    return re.sub(r"\s*<image>\s*", " ", str(raw)).strip()


def decodable(image: Any) -> bool:
    """An image struct the reference can decode: bytes, or a path that is a file (else it drops the image)."""
    if isinstance(image, dict):
        return bool(image.get("bytes")) or bool(image.get("path") and Path(image["path"]).is_file())
    return bool(image)


def reference_fields(images: Sequence[Any], options: Sequence[Any], answer: Any) -> dict[str, Any] | None:
    """What the reference shows of an image-set row (decodable images, cut to 6; stripped choices; the gold
    letter), or None when it drops the row (fewer than 3 images or 2 choices, no letter)."""
    shown = [v for v in images if decodable(v)][:REFERENCE_MAX_IMAGES]
    choices, letter = reference_choices(options), reference_letter(answer)
    if len(shown) < 3 or len(choices) < 2 or letter is None:
        return None
    return {"ref_images": shown, "ref_choices": choices, "ref_gold": ord(letter) - 65}


def reference_unusable(question: str, fields: dict[str, Any]) -> str | None:
    """Why a row the reference keeps cannot be an item (skipped and counted), or None."""
    if not question.strip():
        return "the question is empty"
    if fields["ref_gold"] >= len(fields["ref_choices"]):
        return "the answer letter is not among the options"
    return None


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
    images = tuple(
        Component(id=f"img{i}", kind=ComponentKind.IMAGE, image=hf_image(v, item_id, f"image {i + 1}"))
        for i, v in enumerate(shown)
    )
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
        """Every row; the image bytes only as the reference (it drops an image it cannot decode)."""
        files = self.files(self.pattern)
        if self.as_reference:
            return iter_parquet(files, (*COLUMNS, "images"))
        light = (*COLUMNS, leaf_path(files[0], "images", "path"))  # image count without the bytes
        return iter_parquet(files, light)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        if self.as_reference:
            fields = reference_fields(row.get("images") or [], row.get("options") or [], row.get("answer"))
            if fields is None or self.skip(reference_unusable(reference_question(row.get("question")), fields)):
                return None
            return Candidate(f"{self.name}::{row['id']}", {**row, **fields})
        if not eligible(row, self.min_images, self.max_images) or self.skip(unusable(row)):
            return None
        return Candidate(f"{self.name}::{row['id']}", row)

    def reference_admits(self, row: dict[str, Any]) -> bool:
        """The reference buffers only multi-choice rows with >= 3 images (then shuffles, then filters)."""
        return row.get("question_type") == "multi-choice" and len(row.get("images") or []) >= 3

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        rows = [c.row for c in candidates] if self.as_reference else fetch_columns(candidates, ("images",))
        return [row_to_item(row, self.name, self.screen.rules) for row in rows]

    def load(self, limit: int | None = None) -> list[Item]:
        return self.screen.apply(super().load(limit))

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
