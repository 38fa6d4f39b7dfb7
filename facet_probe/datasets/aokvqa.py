"""A-OKVQA (HuggingFaceM4/A-OKVQA, validation): multiple-choice VQA for the adversarial attacks.

Two layouts: the hub's parquet files (images embedded), or the original release's
`aokvqa_v1p0_val.json` with COCO val2017 images found by id in `coco_dir`
(`<coco_dir>/val2017/<image_id:012d>.jpg` or `<coco_dir>/<image_id:012d>.jpg`). The second is
StopReasoning's layout (`<data_root>/A-OKVQA/` and, for its images, `coco_dir=<data_root>/coco/test2017`);
`sampling: reference` then takes every row in file order, named by its position as the reference names it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from facet_probe.core.items import (
    AS_REFERENCE,
    AnswerType,
    Component,
    ComponentKind,
    ImageRef,
    Item,
    ItemError,
    make_item,
)
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.hub import (
    Candidate,
    Upstream,
    UpstreamLoader,
    fetch_columns,
    hf_image,
    iter_parquet,
    leaf_path,
    read_json,
)
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.datasets.scienceqa import unusable  # the same fields: question, choices

COLUMNS = ("question_id", "question", "choices", "correct_choice_idx", "direct_answers", "rationales")
RELEASE_FILES = {"validation": "aokvqa_v1p0_val.json", "train": "aokvqa_v1p0_train.json"}
COCO_FOLDERS = {"validation": "val2017", "train": "train2017"}


def eligible(row: dict[str, Any]) -> bool:
    """>= 2 choices and the gold index among them."""
    choices = row.get("choices") or []
    idx = row.get("correct_choice_idx")
    return len(choices) >= 2 and idx is not None and 0 <= int(idx) < len(choices)


def row_to_item(row: dict[str, Any], image: ImageRef, dataset: str = "aokvqa", as_reference: bool = False) -> Item:
    return make_item(
        item_id=f"{dataset}::{row['question_id']}",
        dataset=dataset,
        question=row["question"],
        fixed=(Component(id="image", kind=ComponentKind.IMAGE, image=image),),
        choices=tuple(str(c) for c in row["choices"]),
        gold_index=int(row["correct_choice_idx"]),
        answer_type=AnswerType.MCQ,
        metadata={
            "direct_answers": list(row.get("direct_answers") or []),
            "rationales": list(row.get("rationales") or []),
            "image_id": row.get("image_id"),
            **({AS_REFERENCE: True} if as_reference else {}),
        },
    )


def coco_image(coco_dir: Path, image_id: int, folder: str, item_id: str) -> ImageRef:
    """A COCO image by id, from `<coco_dir>/<folder>/` or `<coco_dir>/` itself."""
    name = f"{int(image_id):012d}.jpg"
    for candidate in (coco_dir / folder / name, coco_dir / name):
        if candidate.is_file():
            return ImageRef.from_path(candidate)
    raise ItemError(
        f"item {item_id}: COCO image {name} not found in {coco_dir / folder} or {coco_dir}; "
        f"fetch COCO {folder} (https://cocodataset.org) and pass dataset.coco_dir=<its parent folder>"
    )


class AOKVQA(UpstreamLoader):
    """A-OKVQA multiple-choice questions (validation split by default)."""

    facets = ("option_order",)
    source = "HuggingFaceM4/A-OKVQA"
    license = "Apache-2.0 (annotations); COCO images under their own terms"
    #: StopReasoning: every row of the release JSON in file order, named by its position (its default: all)
    reference = ReferenceSelection("aokvqa", Draw.UPSTREAM, sys.maxsize, id_fields=("index",))

    def __init__(
        self, name: str = "aokvqa", split: str = "validation", coco_dir: str | None = None, **rest
    ) -> None:
        super().__init__(name, **rest)
        self.split = split
        self.coco_dir = str(Path(coco_dir).expanduser()) if coco_dir else None
        if self.as_reference and not self.coco_dir:
            from facet_probe.core.errors import ConfigError

            raise ConfigError(f"dataset {name}: sampling=reference reads the release JSON as the reference does; "
                              "set dataset.coco_dir=<the folder of its COCO images> and dataset.path=<the folder of "
                              f"{RELEASE_FILES[split]}>")

    @property
    def pattern(self) -> str:
        return RELEASE_FILES[self.split] if self.coco_dir else f"data/{self.split}-*.parquet"

    @property
    def upstream(self) -> Upstream:
        if self.coco_dir:
            return Upstream(
                None, (self.pattern,), homepage="https://github.com/allenai/aokvqa (release JSON files)"
            )
        return Upstream(self.source, (self.pattern,))

    def candidates(self) -> Iterator[Candidate]:
        rows: Iterator[dict[str, Any]]
        if self.coco_dir:
            rows = ({**row, "index": index} for index, row in enumerate(read_json(self.root / self.pattern)))
        else:
            files = self.files(self.pattern)
            rows = iter_parquet(files, (*COLUMNS, leaf_path(files[0], "image", "path")))
        for row in rows:
            if eligible(row) and not self.skip(unusable(row, self.as_reference)):
                # as the reference: its id is the row's position, so a repeated question_id is kept
                raw_id = row["index"] if self.as_reference else row["question_id"]
                yield Candidate(f"{self.name}::{raw_id}", row)

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        if self.coco_dir:
            coco = Path(self.coco_dir)
            if not coco.is_dir():
                raise DatasetUnavailable(
                    f"dataset {self.name}: coco_dir {coco} is not a folder; fetch COCO "
                    f"{COCO_FOLDERS[self.split]} from https://cocodataset.org and point coco_dir at it"
                )
            return [
                row_to_item(c.row, coco_image(coco, c.row["image_id"], COCO_FOLDERS[self.split], c.item_id),
                            self.name, self.as_reference)
                for c in candidates
            ]
        rows = fetch_columns(candidates, ("image",))
        return [
            row_to_item(r, hf_image(r["image"], c.item_id), self.name)
            for r, c in zip(rows, candidates, strict=True)
        ]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
