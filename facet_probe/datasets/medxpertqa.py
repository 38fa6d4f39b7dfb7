"""MedXpertQA MM (TsinghuaC3I/MedXpertQA, config MM, test): a clinical case split into evidence chunks.

The case text (the question before "Answer Choices:") is cut into sentences; the last sentence is
the item's question; the others are labelled narrative / labs_exam / imaging by documented keyword
rules, and each run of consecutive same-label sentences becomes one text chunk (>= 3 chunks kept).
The first image is fixed context (as in the paper); the 5 options are the MCQ choices.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from facet_probe.datasets.hub import Candidate, ImageStore, Upstream, UpstreamLoader, letter_index, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.items import AnswerType, Component, ComponentKind, Item, make_item

_CHOICES = re.compile(r"\n?\s*Answer Choices\s*:", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[\"'])")
IMAGING = re.compile(
    r"\b(?:image|images|imaging|radiograph\w*|x-?rays?|ct|cta|computed tomography|mri|mra|magnetic resonance|"
    r"ultrasound|ultrasonograph\w*|sonograph\w*|echocardiogra\w*|angiogra\w*|scans?|photographs?|photos?|"
    r"biops\w*|histolog\w*|histopatholog\w*|patholog\w*|microscop\w*|smear|stain\w*|ecg|ekg|"
    r"electrocardiogra\w*|fundus|fundoscop\w*|endoscop\w*|dermatoscop\w*|shown|depicted|pictured|figure)\b",
    re.IGNORECASE,
)
LABS_EXAM = re.compile(
    r"\b(?:temperature|blood pressure|pulse|heart rate|respiratory rate|respirations|oxygen saturation|"
    r"vital signs?|examination|exam|auscultation|palpation|palpable|tender\w*|laboratory|labs?|serum|plasma|"
    r"hemoglobin|hematocrit|leukocyte\w*|white blood cell\w*|platelets?|sodium|potassium|creatinine|glucose|"
    r"urinalysis|bilirubin|level|levels|count|titer|assay|mg/dl|mmol/l|mm hg|mmhg|/min|bpm|°[cf])"
    r"(?=\W|$)",
    re.IGNORECASE,
)
SECTIONS = ("narrative", "labs_exam", "imaging")


def case_and_question(text: str) -> tuple[list[str], str]:
    """The case sentences and the final question sentence of the stem (answer choices removed)."""
    stem = _CHOICES.split(text, maxsplit=1)[0].strip()
    sentences = [s.strip() for s in _SENTENCE_END.split(stem) if s.strip()]
    return sentences[:-1], sentences[-1] if sentences else ""


def section_of(sentence: str) -> str:
    """narrative, labs_exam or imaging (imaging wins when both match)."""
    if IMAGING.search(sentence):
        return "imaging"
    if LABS_EXAM.search(sentence):
        return "labs_exam"
    return "narrative"


def chunk_case(sentences: list[str]) -> list[tuple[str, str]]:
    """Runs of consecutive same-section sentences as (section, text)."""
    chunks: list[tuple[str, list[str]]] = []
    for s in sentences:
        sec = section_of(s)
        if chunks and chunks[-1][0] == sec:
            chunks[-1][1].append(s)
        else:
            chunks.append((sec, [s]))
    return [(sec, " ".join(parts)) for sec, parts in chunks]


def eligible(row: dict[str, Any], min_chunks: int = 3) -> bool:
    """An image, a single-letter label among the options, and >= `min_chunks` case chunks."""
    options = row.get("options") or {}
    if not row.get("images") or letter_index(row.get("label"), len(options)) is None:
        return False
    sentences, question = case_and_question(row.get("question") or "")
    return bool(question) and len(chunk_case(sentences)) >= min_chunks


def row_to_item(
    row: dict[str, Any], images: ImageStore, dataset: str = "medxpertqa", all_images: bool = False
) -> Item:
    item_id = f"{dataset}::{row['id']}"
    sentences, question = case_and_question(row["question"])
    components = tuple(
        Component(id=f"c{i}", kind=ComponentKind.TEXT_CHUNK, text=text, metadata={"section": sec})
        for i, (sec, text) in enumerate(chunk_case(sentences))
    )
    shown = row["images"] if all_images else row["images"][:1]
    fixed = tuple(
        Component(
            id=f"image{i}", kind=ComponentKind.IMAGE, image=images.get(name, item_id), metadata={"file": name}
        )
        for i, name in enumerate(shown)
    )
    labels = sorted(row["options"])
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=question,
        components=components,
        fixed=fixed,
        choices=tuple(str(row["options"][k]) for k in labels),
        gold_index=labels.index(row["label"].strip()),
        answer_type=AnswerType.MCQ,
        metadata={
            "medical_task": row.get("medical_task"),
            "body_system": row.get("body_system"),
            "question_type": row.get("question_type"),
            "n_images_upstream": len(row["images"]),
            "question_raw": row["question"],
        },
    )


class MedXpertQA(UpstreamLoader):
    """MedXpertQA MM test as chunked clinical cases with the first image fixed."""

    facets = ("evidence_chunk_order",)
    source = "TsinghuaC3I/MedXpertQA"
    license = "MIT"

    def __init__(
        self,
        name: str = "medxpertqa",
        config: str = "MM",
        split: str = "test",
        min_chunks: int = 3,
        all_images: bool = False,
        **rest,
    ) -> None:
        super().__init__(name, **rest)
        self.config, self.split, self.min_chunks, self.all_images = config, split, min_chunks, all_images

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (f"{self.config}/{self.split}.jsonl",), optional=("images.zip",))

    reference = ReferenceSelection("medxpertqa", Draw.ELIGIBLE, 150, seed=42, id_fields=("id", "question_id"))

    def candidates(self) -> Iterator[Candidate]:
        for row in read_jsonl(self.root / f"{self.config}/{self.split}.jsonl"):
            if eligible(row, self.min_chunks):
                yield Candidate(f"{self.name}::{row['id']}", row)

    def images(self) -> ImageStore:
        return ImageStore(
            self.name,
            folders=[self.root / "images"],
            zips=[self.root / "images.zip"],
            hint=f"fetch images.zip from {self.upstream.url} into {self.root}",
        )

    def build_many(self, candidates) -> list[Item]:
        store = self.images()
        return [row_to_item(c.row, store, self.name, self.all_images) for c in candidates]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
