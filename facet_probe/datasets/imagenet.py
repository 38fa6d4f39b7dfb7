"""ImageNet classification tasks with 4, 8 and 16 classes (the attack paper's Appendix C), for the attacks.

Images come from a local ILSVRC2012 validation folder laid out by synset (`<path>/<wnid>/*.JPEG`), or laid
out as StopReasoning reads it (`layout: reference`: the devkit's `map_clsloc.txt` and validation ground truth,
the images in one flat folder; its class names, with underscores, are then the choices).
Each item asks "What is the class of the image?" with the task's class names as choices (in the
order listed below); every validation image of each class by default (the paper), or `per_class` images
drawn per class by a seeded hash of the file name, so a smaller `per_class` gives a prefix of a larger one.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from facet_probe.core.items import AnswerType, Component, ComponentKind, ImageRef, Item, ItemError, make_item
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.hub import IMAGE_SUFFIXES, Candidate, Upstream, UpstreamLoader
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

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

#: StopReasoning's files under `<data_root>/ImageNet` (`utils/datasets.py`, `ImageNetDataset`).
DEVKIT = "ILSVRC/devkit/data"
CLASS_MAP = f"{DEVKIT}/map_clsloc.txt"
GROUND_TRUTH = f"{DEVKIT}/ILSVRC2015_clsloc_validation_ground_truth.txt"
FLAT_FOLDER = "val_2012"


class Layout(StrEnum):
    """How the validation images are laid out under `path`."""

    SYNSETS = "synsets"  #: `<path>/<wnid>/*.JPEG` (e.g. by the common valprep.sh)
    REFERENCE = "reference"  #: StopReasoning's: devkit class map + ground truth, `val_2012/ILSVRC2012_val_<n>.JPEG`


def read_class_map(file: Path) -> dict[str, tuple[str, str]]:
    """`map_clsloc.txt` lines `<wnid> <class id> <name>` as {class id: (wnid, name)}."""
    return {cols[1]: (cols[0], cols[2]) for cols in (line.split() for line in file.read_text().splitlines()) if cols}


def read_ground_truth(file: Path) -> list[tuple[int, str]]:
    """(image number, class id) for each line of the validation ground truth (line n: image n, from 1)."""
    return [(n, str(int(line))) for n, line in enumerate(file.read_text().splitlines(), 1) if line.strip()]


def pick(files: list[Path], k: int, seed: int) -> list[Path]:
    """k files by a seeded hash of their names (prefix-stable in k, independent of listing order)."""
    return sorted(files, key=lambda f: hashlib.sha256(f"{seed}\x1f{f.name}".encode()).hexdigest())[:k]


class ImageNetTask(UpstreamLoader):
    """One of the 4/8/16-class ImageNet tasks over a local validation folder."""

    facets = ("option_order",)
    source = "ImageNet ILSVRC2012 validation (local folder)"
    license = "ImageNet terms of access (non-commercial research and education)"

    def __init__(self, name: str = "imagenet4", classes: int = 4, per_class: int | None = None,
                 layout: Layout | str | None = None, **rest) -> None:
        """`per_class`: None (the paper: every validation image of each class) or that many per class; `layout`:
        None (synset folders, as before the switch existed: old attack folders resume) or a `Layout`."""
        from facet_probe.core.errors import ConfigError, parse_enum

        if classes not in TASKS:
            raise ValueError(f"dataset {name}: classes must be one of {sorted(TASKS)}, got {classes}")
        self.classes, self.per_class = classes, per_class
        super().__init__(name, **rest)
        self.layout = parse_enum(Layout, layout or Layout.SYNSETS, f"dataset {name}: layout")
        self._choices: tuple[str, ...] | None = None
        if self.as_reference and self.layout is not Layout.REFERENCE:
            raise ConfigError(f"dataset {name}: sampling=reference reads the devkit files as the reference does "
                              f"({CLASS_MAP}, {GROUND_TRUTH}); add dataset.layout=reference")

    @property
    def reference(self) -> ReferenceSelection:  # type: ignore[override]  # named after the instance's dataset
        """StopReasoning: every image of the task's classes in ground-truth order, named by its number."""
        return ReferenceSelection(self.name, Draw.UPSTREAM, sys.maxsize, id_fields=("number",))

    @property
    def class_names(self) -> tuple[str, ...]:
        return TASKS[self.classes]

    @property
    def choices(self) -> tuple[str, ...]:
        """The choice texts: ours, or under `layout: reference` the devkit's names (as the reference's `--cls`)."""
        if self.layout is Layout.SYNSETS:
            return self.class_names
        if self._choices is None:
            self._choices = self.devkit_names()
        return self._choices

    def devkit_names(self) -> tuple[str, ...]:
        """The task's class names as `map_clsloc.txt` spells them."""
        names = {wnid: name for wnid, name in read_class_map(self.root / CLASS_MAP).values()}
        missing = [c for c in self.class_names if SYNSETS[c] not in names]
        if missing:
            raise DatasetUnavailable(f"dataset {self.name}: {self.root / CLASS_MAP} lacks the synsets of "
                                     f"{missing}; is it the ILSVRC devkit's map_clsloc.txt?")
        return tuple(names[SYNSETS[c]] for c in self.class_names)

    @property
    def upstream(self) -> Upstream:
        if self.layout is Layout.REFERENCE:
            return Upstream(None, (CLASS_MAP, GROUND_TRUTH), homepage=HOMEPAGE)
        return Upstream(None, tuple(f"{SYNSETS[c]}/*" for c in self.class_names), homepage=HOMEPAGE)

    def class_files(self) -> Iterator[tuple[str, list[Path]]]:
        """(class name, its image files) for each class of the task, in the task's order."""
        if self.layout is Layout.REFERENCE:
            classes = read_class_map(self.root / CLASS_MAP)
            by_wnid: dict[str, list[Path]] = {SYNSETS[c]: [] for c in self.class_names}
            for number, label in read_ground_truth(self.root / GROUND_TRUTH):
                wnid = classes.get(label, ("", ""))[0]
                if wnid in by_wnid:
                    by_wnid[wnid].append(self.root / FLAT_FOLDER / f"ILSVRC2012_val_{number:08d}.JPEG")
            yield from ((c, by_wnid[SYNSETS[c]]) for c in self.class_names)
            return
        for cls in self.class_names:
            folder = self.root / SYNSETS[cls]
            yield cls, sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)

    def candidates(self) -> Iterator[Candidate]:
        """Each class's images (all, or `per_class` by the seeded hash), by class; the reference's layout keeps
        the ground truth's image order."""
        found = []
        for index, (cls, files) in enumerate(self.class_files()):
            if self.per_class is not None and len(files) < self.per_class:
                raise DatasetUnavailable(
                    f"dataset {self.name}: {files[0].parent if files else self.root} ({cls}) has {len(files)} "
                    f"images, {self.per_class} needed per class; is it the full validation folder?"
                )
            for f in pick(files, len(files) if self.per_class is None else self.per_class, self.seed):
                found.append(Candidate(f"{self.name}::{f.stem}", {"file": str(f), "wnid": SYNSETS[cls], "gold": index}))
        if self.layout is Layout.REFERENCE:  # the reference's id: the image's number in the ground truth
            found = [Candidate(c.item_id, {**c.row, "number": str(int(c.item_id.rsplit("_", 1)[1]))}) for c in found]
            found.sort(key=lambda c: int(c.row["number"]))
        yield from found

    def build(self, candidate: Candidate) -> Item:
        row = candidate.row
        if not Path(row["file"]).is_file():
            raise ItemError(f"item {candidate.item_id}: image {row['file']} not found; is {FLAT_FOLDER} the whole "
                            "ILSVRC2012 validation folder?")
        image = Component(id="image", kind=ComponentKind.IMAGE, image=ImageRef.from_path(row["file"]))
        return make_item(
            item_id=candidate.item_id,
            dataset=self.name,
            question=QUESTION,
            fixed=(image,),
            choices=self.choices,
            gold_index=row["gold"],
            answer_type=AnswerType.MCQ,
            metadata={"synset": row["wnid"], "file": Path(row["file"]).name},
        )
