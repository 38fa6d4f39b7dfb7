"""MultiModalQA (allenai/multimodalqa, dev): questions over Wikipedia texts and images (tables left out).

Files: `MMQA_dev.jsonl.gz`, `MMQA_texts.jsonl.gz`, `MMQA_images.jsonl.gz` (from the repository's
`dataset/` folder) and the image archive `final_dataset_images.zip` (or its unpacked folder). Each
question's context documents (`metadata.text_doc_ids`, `metadata.image_doc_ids`) become text chunks
and titled images, texts first then images, in upstream order; those in `supporting_context` are
marked supporting. Only questions answerable from text and images (no table modality) are kept.
`sampling: reference` builds the reference's items instead (`reference_parts`; docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.datasets.hub import Archive, Candidate, ImageStore, Upstream, UpstreamLoader, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

HOMEPAGE = (
    "https://github.com/allenai/multimodalqa (dataset/ folder; images: final_dataset_images.zip "
    "from the README's link)"
)
TEXTS, IMAGES = "MMQA_texts.jsonl.gz", "MMQA_images.jsonl.gz"
ARCHIVE = "final_dataset_images.zip"


def answers(row: dict[str, Any]) -> list[str]:
    return [str(a["answer"]) for a in row.get("answers") or [] if str(a.get("answer", "")).strip()]


def eligible(
    row: dict[str, Any], texts: dict[str, Any], images: dict[str, Any], min_text: int = 1, min_images: int = 1
) -> bool:
    """Text and image modalities only, an answer, and enough known text and image documents."""
    meta = row.get("metadata") or {}
    modalities = set(meta.get("modalities") or [])
    if "table" in modalities or not modalities or not answers(row):
        return False
    n_text = sum(1 for d in meta.get("text_doc_ids") or [] if d in texts)
    n_img = sum(1 for d in meta.get("image_doc_ids") or [] if d in images)
    return n_text >= min_text and n_img >= min_images


def unusable(row: dict[str, Any], texts: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None."""
    if not str(row.get("question") or "").strip():
        return "the question is empty"
    if any(not str(texts[d].get("text") or "").strip() for d in row["metadata"].get("text_doc_ids") or [] if d in texts):
        return "a text document is empty"
    return None


# --------------------------------------------------------------------------- as the reference (`sampling: reference`)
REFERENCE_ARCHIVES = ("mmqa_images.zip", ARCHIVE)  #: the reference's name for the image archive, then upstream's
REFERENCE_MIN, REFERENCE_CAP, REFERENCE_CHARS = 3, 4, 500  #: ids needed, documents shown, characters of a text


def reference_contexts(texts: list[dict[str, Any]], images: list[dict[str, Any]]) -> tuple[dict, dict]:
    """The reference's maps: text id -> its `text` (or `body`, or ""), image id -> its record."""
    return ({r.get("id") or r.get("doc_id"): r.get("text") or r.get("body") or "" for r in texts},
            {r.get("id") or r.get("doc_id"): r for r in images})


def reference_eligible(row: dict[str, Any]) -> bool:
    """The reference's filter: 3+ text and 3+ image ids (known or not; tables and answers not looked at)."""
    meta = row.get("metadata") or {}
    return len(meta.get("text_doc_ids") or []) >= REFERENCE_MIN and len(meta.get("image_doc_ids") or []) >= REFERENCE_MIN


def reference_parts(row: dict[str, Any], texts: dict, images: dict, archive: Archive) -> tuple[list[str], list[str]]:
    """What the reference shows: the first 4 texts, each cut to 500 characters, then stripped (an unknown or
    empty one left out), untitled; and the archive members of the first 4 images it finds."""
    meta = row.get("metadata") or {}
    cut = (str(texts.get(d, ""))[:REFERENCE_CHARS] for d in (meta.get("text_doc_ids") or [])[:REFERENCE_CAP])
    members = []
    for d in (meta.get("image_doc_ids") or [])[:REFERENCE_CAP]:
        path = images.get(d, {}).get("path") or f"{d}.jpg"
        if (found := archive.first((path, f"final_dataset_images/{path}", f"images/{path}"))) is not None:
            members.append(found)
    return [t.strip() for t in cut if t], members


def reference_unusable(row: dict[str, Any]) -> str | None:
    """Why a row the reference keeps cannot be an item (skipped and counted), or None."""
    if not str(row.get("question", "")).strip():
        return "the question is empty"
    if not row["ref_texts"]:
        return "no text (mixed_modality_order needs text and images; the reference shows the images alone)"
    if not all(row["ref_texts"]):
        return "a text is only spaces (the reference shows it empty)"
    return None


def reference_item(row: dict[str, Any], archive: Archive, dataset: str = "mmqa") -> Item:
    """The reference's item: texts then images, components `text_<i>`/`image_<i>`, the first answer as gold."""
    texts = [Component(id=f"text_{i}", kind=ComponentKind.TEXT_CHUNK, text=t) for i, t in enumerate(row["ref_texts"])]
    images = [Component(id=f"image_{len(texts) + i}", kind=ComponentKind.IMAGE, image=image, metadata={"path": m})
              for i, (m, image) in enumerate(zip(row["ref_images"], archive.read(row["ref_images"]), strict=True))]
    golds = row.get("answers") or []
    return make_item(item_id=f"{dataset}::{row.get('qid')}", dataset=dataset, question=str(row.get("question", "")),
                     components=(*texts, *images), gold_answer=str(golds[0].get("answer", "") if golds else ""),
                     answer_type=AnswerType.FREE, metadata={AS_REFERENCE: True, "type": (row.get("metadata") or {}).get("type")})


def row_to_item(
    row: dict[str, Any],
    texts: dict[str, Any],
    images: dict[str, Any],
    store: ImageStore,
    dataset: str = "mmqa",
) -> Item:
    item_id = f"{dataset}::{row['qid']}"
    meta = row["metadata"]
    support = {c["doc_id"] for c in row.get("supporting_context") or []}
    components = [
        Component(
            id=f"t_{d}",
            kind=ComponentKind.TEXT_CHUNK,
            title=texts[d].get("title"),
            text=texts[d]["text"],
            metadata={"supporting": d in support},
        )
        for d in meta.get("text_doc_ids") or []
        if d in texts
    ]
    components += [
        Component(
            id=f"i_{d}",
            kind=ComponentKind.IMAGE,
            title=images[d].get("title"),
            image=store.get(images[d]["path"], item_id),
            metadata={"supporting": d in support, "path": images[d]["path"]},
        )
        for d in meta.get("image_doc_ids") or []
        if d in images
    ]
    golds = answers(row)
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=row["question"],
        components=tuple(components),
        gold_answer=golds[0],
        answer_aliases=tuple(golds[1:]),
        answer_type=AnswerType.FREE,
        metadata={"type": meta.get("type"), "modalities": list(meta.get("modalities") or [])},
    )


class MMQA(UpstreamLoader):
    """MultiModalQA dev questions over text and images (requires a local copy: not on the hub)."""

    facets = ("mixed_modality_order",)
    source = "allenai/multimodalqa"
    license = "MIT (repository); texts and images from Wikipedia under their own licences"

    def __init__(
        self, name: str = "mmqa", split: str = "dev", min_text: int = 1, min_images: int = 1, **rest
    ) -> None:
        super().__init__(name, **rest)
        self.split, self.min_text, self.min_images = split, min_text, min_images
        self._contexts: tuple[dict[str, Any], dict[str, Any]] | None = None
        self._archive: Archive | None = None
        self._reference_contexts: tuple[dict, dict] = ({}, {})

    @property
    def upstream(self) -> Upstream:
        return Upstream(
            None,
            (f"MMQA_{self.split}.jsonl.gz", TEXTS, IMAGES),
            optional=(ARCHIVE, REFERENCE_ARCHIVES[0]),
            homepage=HOMEPAGE,
        )

    def contexts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Text and image documents by id (read once)."""
        if self._contexts is None:
            self._contexts = (
                {r["id"]: r for r in read_jsonl(self.root / TEXTS)},
                {r["id"]: r for r in read_jsonl(self.root / IMAGES)},
            )
        return self._contexts

    reference = ReferenceSelection("mmqa", Draw.ELIGIBLE, 200, seed=42, id_fields=("qid", "id"))

    def candidates(self) -> Iterator[Candidate]:
        rows = read_jsonl(self.root / f"MMQA_{self.split}.jsonl.gz")
        if self.as_reference:
            yield from (Candidate(f"{self.name}::{row.get('qid')}", row) for row in rows if reference_eligible(row))
            return
        texts, images = self.contexts()
        for row in rows:
            if eligible(row, texts, images, self.min_text, self.min_images) and not self.skip(unusable(row, texts)):
                yield Candidate(f"{self.name}::{row['qid']}", row)

    def reference_archive(self) -> Archive:
        """The image archive the reference reads (`mmqa_images.zip`, the upstream `final_dataset_images.zip`
        under the name it downloads it to; that name too)."""
        if self._archive is None:
            self._archive = Archive.found(self.name, self.root, REFERENCE_ARCHIVES, HOMEPAGE)
            self._reference_contexts = reference_contexts(list(read_jsonl(self.root / TEXTS)),
                                                          list(read_jsonl(self.root / IMAGES)))
        return self._archive

    def reference_pick(self, candidate: Candidate) -> Candidate | None:
        """The reference keeps a row only when 3 of its first 4 images are in the archive."""
        archive = self.reference_archive()
        shown, members = reference_parts(candidate.row, *self._reference_contexts, archive)
        if len(members) < REFERENCE_MIN:
            return None
        return Candidate(candidate.item_id, {**candidate.row, "ref_texts": shown, "ref_images": members})

    def reference_unusable(self, candidate: Candidate) -> str | None:
        return reference_unusable(candidate.row)

    def build_many(self, candidates) -> list[Item]:
        if self.as_reference:
            return [reference_item(c.row, self.reference_archive(), self.name) for c in candidates]
        texts, images = self.contexts()
        store = ImageStore(
            self.name,
            folders=[self.root / "final_dataset_images"],
            zips=[self.root / "final_dataset_images.zip"],
            hint=f"fetch final_dataset_images.zip ({HOMEPAGE}) into {self.root}",
        )
        return [row_to_item(c.row, texts, images, store, self.name) for c in candidates]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
