"""MedFrameQA (SuhaoYu1020/MedFrameQA, test): multi-frame medical MCQ for image_set_order (2-5 images).

Frames come from the `image_1` ... `image_5` columns (or, in re-uploads, one `image` list column);
they are the orderable components, the options stay fixed. The position-reference screen verdict is
in `metadata["position_screen"]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Item, ItemError, make_item
from facet_probe.datasets.hub import Candidate, Upstream, fetch_columns, iter_parquet, leaf_path, letter_index
from facet_probe.datasets.image_set import ImageSetLoader, image_components
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.datasets.screen import METADATA_KEY, ScreenRules, screen_text

COLUMNS = ("question_id", "system", "organ", "keyword", "modality", "video_id", "question", "options")
ANSWER_COLUMNS = ("correct_answer", "answer")
_FRAME = re.compile(r"^image_(\d+)$")


def frame_columns(names: Sequence[str]) -> list[str]:
    """`image_1`, `image_2`, ... in numeric order."""
    return sorted((n for n in names if _FRAME.match(n)), key=lambda n: int(n.removeprefix("image_")))


def frames(row: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    """The non-empty frames of a row, in column order (or the `image` list of a re-upload)."""
    if columns:
        return [row[c] for c in columns if row.get(c) is not None]
    return [v for v in row.get("image") or [] if v is not None]


def answer_of(row: dict[str, Any]) -> Any:
    return next((row[c] for c in ANSWER_COLUMNS if row.get(c) is not None), None)


def eligible(row: dict[str, Any], columns: Sequence[str], min_images: int = 2, max_images: int = 5) -> bool:
    options = row.get("options") or []
    return (
        min_images <= len(frames(row, columns)) <= max_images
        and len(options) >= 2
        and letter_index(answer_of(row), len(options)) is not None
    )


def unusable(row: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None."""
    if not str(row.get("question") or "").strip():
        return "the question is empty"
    if any(not str(o).strip() for o in row["options"]):
        return "an option is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def reference_options(value: Any) -> list[Any]:
    """The reference's options: a list as it is, a mapping's values by sorted key (its `_choices_from_options`)."""
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    return list(value) if isinstance(value, (list, tuple)) else []


def row_to_item(row: dict[str, Any], columns: Sequence[str], dataset: str = "medframeqa",
                rules: ScreenRules = ScreenRules.REFERENCE) -> Item:
    """The item of an eligible row; a row carrying `reference_fields` is built as the reference shows it."""
    item_id = f"{dataset}::{row['question_id']}"
    as_reference = "ref_images" in row
    if as_reference:
        choices, gold, shown = tuple(row["ref_choices"]), row["ref_gold"], row["ref_images"]
    else:
        choices, shown = tuple(str(o) for o in row["options"]), frames(row, columns)
        gold = letter_index(answer_of(row), len(choices))
    images = image_components(shown, item_id, "frame")
    screen = screen_text(row["question"], choices, rules=rules)
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=str(row["question"]),
        components=images,
        choices=choices,
        gold_index=gold,
        answer_type=AnswerType.MCQ,
        metadata={
            **({AS_REFERENCE: True} if as_reference else {}),
            **{k: row.get(k) for k in ("system", "organ", "keyword", "modality", "video_id")},
            METADATA_KEY: screen.to_metadata(),
        },
    )


class MedFrameQA(ImageSetLoader):
    """MedFrameQA test items with 2-5 frames, screened for position references."""

    source = "SuhaoYu1020/MedFrameQA"
    license = "CC BY 4.0 (per the dataset card; frames come from educational videos)"
    pattern = "data/test-*.parquet"
    upstream = Upstream(source, (pattern,))
    reference = ReferenceSelection("medframeqa", Draw.BUFFER, 195, seed=48, multiplier=6,
                                   id_fields=("question_id", "id"))

    def __init__(self, name: str = "medframeqa", min_images: int = 2, max_images: int = 5, **rest) -> None:
        super().__init__(name, min_images, max_images, **rest)
        self._frame_columns: list[str] = []

    def _schema(self, file: Path) -> tuple[list[str], list[str]]:
        """(frame columns, light columns to scan) for this file's schema."""
        import pyarrow.parquet as pq

        names = pq.ParquetFile(file).schema_arrow.names
        answer = [c for c in ANSWER_COLUMNS if c in names]
        if not answer:
            raise ItemError(f"{file}: no answer column (expected one of {ANSWER_COLUMNS}); found {names}")
        columns = frame_columns(names)
        if columns and self.as_reference:
            light = columns  # the reference drops a frame it cannot decode: the bytes decide
        elif columns:
            light = [leaf_path(file, c, "path") for c in columns]
        elif "image" in names:
            light = ["image"] if self.as_reference else [leaf_path(file, "image", "path")]
        else:
            raise ItemError(f"{file}: no image_1..image_5 (or image) columns; found {names}")
        return columns, [*COLUMNS, *answer, *light]

    def rows(self) -> Iterator[dict[str, Any]]:
        files = self.files(self.pattern)
        self._frame_columns, light = self._schema(files[0])
        return iter_parquet(files, light)

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        item_id = f"{self.name}::{row['question_id']}"
        if self.as_reference:
            return self.reference_candidate(item_id, row, frames(row, self._frame_columns),
                                            reference_options(row.get("options") or row.get("choices")),
                                            row.get("correct_answer") or row.get("answer"),
                                            str(row.get("question", "")))
        if not eligible(row, self._frame_columns, self.min_images, self.max_images) or self.skip(unusable(row)):
            return None
        return Candidate(item_id, row)

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        heavy = self._frame_columns or ["image"]
        rows = [c.row for c in candidates] if self.as_reference else fetch_columns(candidates, heavy)
        return [row_to_item(row, self._frame_columns, self.name, self.screen.rules) for row in rows]
