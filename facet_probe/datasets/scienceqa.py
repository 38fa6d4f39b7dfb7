"""ScienceQA image questions, for the adversarial attacks: the hub's parquet (derek-thomas/ScienceQA, the
default) or the original release's layout that StopReasoning reads (`layout: reference`).

The image (and the `hint` context, when present) are fixed context; `choices` with the integer
`answer` make the MCQ. The parquet has no question ids: items are `scienceqa::<split>-<row>`; the release
names each problem by its id (`scienceqa::<pid>`). `sampling: reference` takes the release's test ids in
the reference's order (`pid_splits_w_img.json`), named as it names them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from enum import StrEnum
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
#: The release files StopReasoning's `ScienceQADataset` reads (`<data_root>/scienceqa/`).
PROBLEMS, SPLITS = "problems.json", "pid_splits_w_img.json"


class Layout(StrEnum):
    """Which copy of ScienceQA `path` holds."""

    HUB = "hub"  #: derek-thomas/ScienceQA `data/<split>-*.parquet`, images embedded
    REFERENCE = "reference"  #: `problems.json`, `pid_splits_w_img.json`, `images/<pid>/image.png` (StopReasoning)


def eligible(row: dict[str, Any], as_reference: bool = False) -> bool:
    """An image, >= 2 choices (non-empty ones; as the reference, empty ones too), and the answer among them."""
    choices = [c for c in (row.get("choices") or []) if as_reference or str(c).strip()]
    answer = row.get("answer")
    return (
        row.get("image") is not None
        and len(choices) >= 2
        and answer is not None
        and 0 <= int(answer) < len(row["choices"])
    )


def unusable(row: dict[str, Any], as_reference: bool = False) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None. The reference keeps an empty
    choice; it also keeps an empty question, which no item can hold."""
    if not str(row.get("question") or "").strip():
        return "the question is empty"
    if not as_reference and any(not str(c).strip() for c in row["choices"]):
        return "a choice is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def release_image(root: Path, pid: str, item_id: str) -> ImageRef:
    """The release's image of problem `pid` (`images/<pid>/image.png`, where StopReasoning reads it)."""
    file = root / "images" / pid / "image.png"
    if not file.is_file():
        raise ItemError(f"item {item_id}: image {file} not found; copy the release's images/<pid>/image.png "
                        "folders next to problems.json")
    return ImageRef.from_path(file)


def row_to_item(row: dict[str, Any], raw_id: str, dataset: str = "scienceqa", image: ImageRef | None = None,
                as_reference: bool = False) -> Item:
    item_id = f"{dataset}::{raw_id}"
    fixed = [Component(id="image", kind=ComponentKind.IMAGE, image=image or hf_image(row["image"], item_id))]
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
            **{k: row.get(k) for k in ("task", "grade", "subject", "topic", "category", "skill", "lecture",
                                       "solution")},
            **({AS_REFERENCE: True} if as_reference else {}),
        },
    )


class ScienceQA(UpstreamLoader):
    """ScienceQA questions that have an image."""

    facets = ("option_order",)
    source = "derek-thomas/ScienceQA"
    license = "CC BY-NC-SA 4.0 (non-commercial)"
    #: StopReasoning: every test id of `pid_splits_w_img.json` in its order, named by its pid (its default: all)
    reference = ReferenceSelection("scienceqa", Draw.UPSTREAM, sys.maxsize, id_fields=("pid",))

    def __init__(self, name: str = "scienceqa", split: str = "test", layout: Layout | str | None = None,
                 **rest) -> None:
        """`layout`: None (the hub's, as before the switch existed: old attack folders resume) or a `Layout`."""
        from facet_probe.core.errors import ConfigError, parse_enum

        super().__init__(name, **rest)
        self.split = split
        self.layout = parse_enum(Layout, layout or Layout.HUB, f"dataset {name}: layout")
        if self.as_reference and self.layout is not Layout.REFERENCE:
            raise ConfigError(f"dataset {name}: sampling=reference reads the release's files as the reference "
                              f"does ({PROBLEMS}, {SPLITS}); add dataset.layout=reference")

    @property
    def pattern(self) -> str:
        return f"data/{self.split}-*.parquet"

    @property
    def upstream(self) -> Upstream:
        if self.layout is Layout.REFERENCE:
            return Upstream(None, (PROBLEMS, SPLITS),
                            homepage="https://github.com/lupantech/ScienceQA (problems.json, images/<pid>/image.png)"
                                     " with StopReasoning's pid_splits_w_img.json")
        return Upstream(self.source, (self.pattern,))

    def candidates(self) -> Iterator[Candidate]:
        for row in self.rows():
            if eligible(row, self.as_reference) and not self.skip(unusable(row, self.as_reference)):
                yield Candidate(f"{self.name}::{row['raw_id']}", row)

    def rows(self) -> Iterator[dict[str, Any]]:
        """The split's problems in upstream order, each with its `raw_id` (the pid, or `<split>-<row>`)."""
        if self.layout is Layout.REFERENCE:
            problems = read_json(self.root / PROBLEMS)
            for pid in read_json(self.root / SPLITS)[self.split]:
                if not self.skip(None if pid in problems else f"an id of {SPLITS} not in {PROBLEMS}"):
                    yield {**problems[pid], "pid": pid, "raw_id": pid}
            return
        files = self.files(self.pattern)
        for index, row in enumerate(iter_parquet(files, (*COLUMNS, leaf_path(files[0], "image", "path")))):
            yield {**row, "raw_id": f"{self.split}-{index}"}

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        if self.layout is Layout.REFERENCE:
            return [row_to_item(c.row, c.row["raw_id"], self.name, release_image(self.root, c.row["pid"], c.item_id),
                                self.as_reference) for c in candidates]
        return [row_to_item(row, row["raw_id"], self.name, as_reference=self.as_reference)
                for row in fetch_columns(candidates, ("image",))]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
