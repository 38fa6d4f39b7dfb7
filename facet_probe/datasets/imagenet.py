"""ImageNet classification tasks with 4, 8 and 16 classes (the attack paper's Appendix C), for the attacks.

Images come from a local ILSVRC2012 validation folder laid out by synset (`<path>/<wnid>/*.JPEG`).
Each item asks "What is the class of the image?" with the task's class names as choices (in the
order listed below); every validation image of each class by default (the paper), or `per_class` images
drawn per class by a seeded hash of the file name, so a smaller `per_class` gives a prefix of a larger one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.hub import IMAGE_SUFFIXES, Candidate, Upstream, UpstreamLoader
from facet_probe.items import AnswerType, Component, ComponentKind, ImageRef, Item, make_item

QUESTION = "What is the class of the image?"
HOMEPAGE = (
    "https://image-net.org (ILSVRC2012 validation images, arranged into one folder per synset id, "
    "e.g. with the common valprep.sh script)"
)

#: Class name -> WordNet synset id (ILSVRC2012 LOC_synset_mapping).
SYNSETS: dict[str, str] = {
    "English setter": "n02100735",
    "Persian cat": "n02123394",
    "school bus": "n04146614",
    "pineapple": "n07753275",
    "bison": "n02410509",
    "howler monkey": "n02492660",
    "hippopotamus": "n02398521",
    "chow": "n02112137",
    "giant panda": "n02510455",
    "American Staffordshire terrier": "n02093428",
    "Shetland sheepdog": "n02105855",
    "Great Pyrenees": "n02111500",
    "piggy bank": "n03935335",
    "street sign": "n06794110",
    "bell cote": "n02825657",
    "fountain pen": "n03388183",
    "Windsor tie": "n04591157",
    "volleyball": "n04540053",
    "overskirt": "n03866082",
    "sarong": "n04136333",
    "purse": "n04026417",
    "bolo tie": "n02865351",
    "bib": "n02834397",
    "parachute": "n03888257",
    "sleeping bag": "n04235860",
    "television": "n04404412",
    "swimming trunks": "n04371430",
    "measuring cup": "n03733805",
}

TASKS: dict[int, tuple[str, ...]] = {
    4: ("English setter", "Persian cat", "school bus", "pineapple"),
    8: (
        "bison",
        "howler monkey",
        "hippopotamus",
        "chow",
        "giant panda",
        "American Staffordshire terrier",
        "Shetland sheepdog",
        "Great Pyrenees",
    ),
    16: (
        "piggy bank",
        "street sign",
        "bell cote",
        "fountain pen",
        "Windsor tie",
        "volleyball",
        "overskirt",
        "sarong",
        "purse",
        "bolo tie",
        "bib",
        "parachute",
        "sleeping bag",
        "television",
        "swimming trunks",
        "measuring cup",
    ),
}


def pick(files: list[Path], k: int, seed: int) -> list[Path]:
    """k files by a seeded hash of their names (prefix-stable in k, independent of listing order)."""
    return sorted(files, key=lambda f: hashlib.sha256(f"{seed}\x1f{f.name}".encode()).hexdigest())[:k]


class ImageNetTask(UpstreamLoader):
    """One of the 4/8/16-class ImageNet tasks over a local validation folder."""

    facets = ("option_order",)
    source = "ImageNet ILSVRC2012 validation (local folder)"
    license = "ImageNet terms of access (non-commercial research and education)"

    def __init__(self, name: str = "imagenet4", classes: int = 4, per_class: int | None = None, **rest) -> None:
        """`per_class`: None (the paper: every validation image of each class) or that many per class."""
        super().__init__(name, **rest)
        if classes not in TASKS:
            raise ValueError(f"dataset {name}: classes must be one of {sorted(TASKS)}, got {classes}")
        self.classes, self.per_class = classes, per_class

    @property
    def class_names(self) -> tuple[str, ...]:
        return TASKS[self.classes]

    @property
    def upstream(self) -> Upstream:
        return Upstream(None, tuple(f"{SYNSETS[c]}/*" for c in self.class_names), homepage=HOMEPAGE)

    def candidates(self) -> Iterator[Candidate]:
        for index, cls in enumerate(self.class_names):
            folder = self.root / SYNSETS[cls]
            files = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
            if self.per_class is not None and len(files) < self.per_class:
                raise DatasetUnavailable(
                    f"dataset {self.name}: {folder} ({cls}) has {len(files)} images, "
                    f"{self.per_class} needed per class; is it the full validation folder?"
                )
            for f in pick(files, len(files) if self.per_class is None else self.per_class, self.seed):
                yield Candidate(
                    f"{self.name}::{f.stem}", {"file": str(f), "wnid": SYNSETS[cls], "gold": index}
                )

    def build(self, candidate: Candidate) -> Item:
        row = candidate.row
        image = Component(id="image", kind=ComponentKind.IMAGE, image=ImageRef.from_path(row["file"]))
        return make_item(
            item_id=candidate.item_id,
            dataset=self.name,
            question=QUESTION,
            fixed=(image,),
            choices=self.class_names,
            gold_index=row["gold"],
            answer_type=AnswerType.MCQ,
            metadata={"synset": row["wnid"], "file": Path(row["file"]).name},
        )
