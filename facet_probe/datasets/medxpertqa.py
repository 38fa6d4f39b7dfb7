"""MedXpertQA MM (TsinghuaC3I/MedXpertQA, config MM, test): a clinical case split into evidence chunks.

`sampling: stable` (ours): the case text (the question before "Answer Choices:") is cut into sentences; the
last sentence is the item's question; the others are labelled narrative / labs_exam / imaging by documented
keyword rules, and each run of consecutive same-label sentences becomes one text chunk (>= 3 chunks kept).
`sampling: reference` builds as the reference's `paper_loaders.py`: the whole question text split at section
headers (or blank lines), three chunks shown as "Evidence A/B/C", and one fixed question.
The first image is fixed context (as in the paper); the 5 options are the MCQ choices.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from facet_probe.core.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.datasets.hub import Candidate, ImageStore, Upstream, UpstreamLoader, letter_index, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

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

#: The reference's section headers (`_MEDXPERT_HEADER_PATTERNS`): a line opening with one, then ":" or "-".
REFERENCE_HEADERS = (
    ("narrative", re.compile(r"^\s*(history|chief complaint|presentation|case|vignette|patient)\s*[:\-]",
                             re.I | re.M)),
    ("labs_exam", re.compile(r"^\s*(physical\s+exam|examination|exam findings|laboratory|labs?|"
                             r"vital\s+signs?|vitals)\s*[:\-]", re.I | re.M)),
    ("imaging", re.compile(r"^\s*(imaging|radiology|x[- ]?ray|ct scan|mri|ultrasound|pathology|"
                           r"ecg|ekg)\s*[:\-]", re.I | re.M)),
)
#: The one question the reference asks of every MedXpertQA item (the case is in the evidence).
REFERENCE_QUESTION = "Based on the evidence above, select the best answer."
_BLANK_LINE = re.compile(r"\n\s*\n")


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
    """An image, a single-letter label among the options, and >= `min_chunks` case chunks (an empty question
    passes, to be counted by `unusable`)."""
    options = row.get("options") or {}
    if not row.get("images") or letter_index(row.get("label"), len(options)) is None:
        return False
    sentences, question = case_and_question(row.get("question") or "")
    return not question or len(chunk_case(sentences)) >= min_chunks  # an empty one: unusable, counted


def unusable(row: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item under `stable` (skipped and counted), or None."""
    if not case_and_question(row.get("question") or "")[1]:
        return "the question is empty"
    if any(not str(v).strip() for v in row["options"].values()):
        return "an option is empty (dataset.sampling=reference keeps it, as the reference does)"
    return None


def row_to_item(
    row: dict[str, Any], images: ImageStore, dataset: str = "medxpertqa", all_images: bool = False
) -> Item:
    item_id = f"{dataset}::{row['id']}"
    sentences, question = case_and_question(row["question"])
    components = tuple(
        Component(id=f"c{i}", kind=ComponentKind.TEXT_CHUNK, text=text, metadata={"section": sec})
        for i, (sec, text) in enumerate(chunk_case(sentences))
    )
    labels = sorted(row["options"])
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=question,
        components=components,
        fixed=fixed_images(row["images"] if all_images else row["images"][:1], images, item_id),
        choices=tuple(str(row["options"][k]) for k in labels),
        gold_index=letter_index(row["label"], len(labels)),  # "C", " c ", "(C)": as `eligible` reads it
        answer_type=AnswerType.MCQ,
        metadata=row_metadata(row, len(row["images"])),
    )


def fixed_images(names: list[str], images: ImageStore, item_id: str) -> tuple[Component, ...]:
    """The image files as fixed image components, in order."""
    return tuple(
        Component(id=f"image{i}", kind=ComponentKind.IMAGE, image=images.get(name, item_id), metadata={"file": name})
        for i, name in enumerate(names)
    )


def row_metadata(row: dict[str, Any], n_images: int) -> dict[str, Any]:
    return {
        "medical_task": row.get("medical_task"),
        "body_system": row.get("body_system"),
        "question_type": row.get("question_type"),
        "n_images_upstream": n_images,
        "question_raw": row.get("question"),
    }


# --------------------------------------------------------------------------- as the reference
def reference_case_text(row: Mapping[str, Any]) -> str:
    """The text the reference splits: the first non-empty of question, context, case, prompt, input (whole:
    its answer choices included)."""
    return next((str(row[f]) for f in ("question", "context", "case", "prompt", "input") if row.get(f)), "")


def header_chunks(text: str) -> list[tuple[str | None, str]]:
    """(section, text) chunks as the reference cuts them: at each header (a lead before the first kept
    unlabelled), or, with no header, at blank lines; stripped, empty ones dropped."""
    hits = sorted((m.start(), m.end(), section) for section, pattern in REFERENCE_HEADERS
                  for m in pattern.finditer(text))
    if not hits:
        return [(None, part.strip()) for part in _BLANK_LINE.split(text) if part.strip()]
    lead = text[: hits[0][0]].strip()
    ends = [start for start, _, _ in hits[1:]] + [len(text)]
    chunks = [(section, text[start:end].strip()) for (start, _, section), end in zip(hits, ends, strict=True)]
    return ([(None, lead)] if lead else []) + [(section, chunk) for section, chunk in chunks if chunk]


def three_chunks(chunks: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """The reference's three: the first narrative, labs_exam and imaging chunk when all three exist, else
    the first three chunks."""
    first: dict[str, tuple[str | None, str]] = {}
    for section, text in chunks:
        if section in SECTIONS:
            first.setdefault(section, (section, text))
    return [first[s] for s in SECTIONS] if len(first) == len(SECTIONS) else chunks[:3]


def reference_image_names(row: Mapping[str, Any]) -> list[str]:
    """The first of the image, images, image_list fields the row has, as a list of file names."""
    value: Any = next((row[f] for f in ("image", "images", "image_list") if row.get(f) is not None), [])
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def reference_choices(row: Mapping[str, Any]) -> tuple[list[str], int] | None:
    """The options stripped (a mapping by sorted key) and the gold index as the reference reads them (an int,
    a lone letter, or an option's text), or None where it cannot (the reference drops the row)."""
    value = row.get("options") or row.get("choices") or []
    if isinstance(value, Mapping):
        choices = [str(value[k]).strip() for k in sorted(value, key=str)]
    else:
        choices = [str(c).strip() for c in value]
    answer = row.get("answer")
    if answer is None:
        answer = row.get("label", row.get("correct_answer"))
    text = str(answer).strip()
    if len(choices) < 2:
        return None
    if isinstance(answer, int) and 0 <= answer < len(choices):
        return choices, answer
    if len(text) == 1 and text.isalpha() and 0 <= ord(text.upper()) - 65 < len(choices):
        return choices, ord(text.upper()) - 65
    return (choices, choices.index(text)) if text in choices else None


def reference_item(row: dict[str, Any], images: ImageStore, dataset: str, all_images: bool = False) -> Item:
    """The item the reference builds: three chunks titled Evidence A/B/C, its one question, the options
    stripped, the first image found in the archive fixed."""
    item_id = f"{dataset}::{row['id']}"
    found = [name for name in reference_image_names(row) if name in images]
    picked = three_chunks(header_chunks(reference_case_text(row)))
    choices, gold = reference_choices(row)  # type: ignore[misc]  # a candidate's row has them
    components = tuple(
        Component(id=f"evidence_{i}", kind=ComponentKind.TEXT_CHUNK, title=f"Evidence {'ABC'[i]}", text=text,
                  metadata={"section": section})
        for i, (section, text) in enumerate(picked)
    )
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=REFERENCE_QUESTION,
        components=components,
        fixed=fixed_images(found if all_images else found[:1], images, item_id),
        choices=tuple(choices),
        gold_index=gold,
        answer_type=AnswerType.MCQ,
        metadata={**row_metadata(row, len(found)), AS_REFERENCE: True},
    )


class MedXpertQA(UpstreamLoader):
    """MedXpertQA MM test as chunked clinical cases with the first image fixed."""

    facets = ("evidence_chunk_order",)
    source = "TsinghuaC3I/MedXpertQA"
    license = "MIT"
    conversion_version: ClassVar[int] = 2
    reference = ReferenceSelection("medxpertqa", Draw.ELIGIBLE, 150, seed=42, id_fields=("id", "question_id"))

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
        self._images: ImageStore | None = None

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (f"{self.config}/{self.split}.jsonl",), optional=("images.zip",))

    def rows(self) -> Iterator[dict[str, Any]]:
        return read_jsonl(self.root / f"{self.config}/{self.split}.jsonl")

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        """Ours: `eligible` and usable. As the reference: an image found in the archive and 3+ header chunks
        (its options and answer are read after its shuffle: `reference_pick`)."""
        if self.as_reference:
            keep = len(header_chunks(reference_case_text(row))) >= 3 and any(
                name in self.images() for name in reference_image_names(row))
        else:
            keep = eligible(row, self.min_chunks) and not self.skip(unusable(row))
        return Candidate(f"{self.name}::{row['id']}", row) if keep else None

    def reference_pick(self, candidate: Candidate) -> Candidate | None:
        """Dropped after the reference's shuffle, as it drops it: options or an answer it cannot read."""
        return candidate if reference_choices(candidate.row) is not None else None

    def images(self) -> ImageStore:
        if self._images is None:
            self._images = ImageStore(
                self.name,
                folders=[self.root / "images"],
                zips=[self.root / "images.zip"],
                hint=f"fetch images.zip from {self.upstream.url} into {self.root}",
            )
        return self._images

    def build_many(self, candidates) -> list[Item]:
        make = reference_item if self.as_reference else row_to_item
        return [make(c.row, self.images(), self.name, self.all_images) for c in candidates]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
