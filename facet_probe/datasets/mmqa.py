"""MultiModalQA (allenai/multimodalqa, dev): questions over Wikipedia texts and images (tables left out).

Files: `MMQA_dev.jsonl.gz`, `MMQA_texts.jsonl.gz`, `MMQA_images.jsonl.gz` (from the repository's
`dataset/` folder) and the image archive `final_dataset_images.zip` (or its unpacked folder). Each
question's context documents (`metadata.text_doc_ids`, `metadata.image_doc_ids`) become text chunks
and titled images, texts first then images, in upstream order; those in `supporting_context` are
marked supporting. Only questions answerable from text and images (no table modality) are kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.datasets.hub import Candidate, ImageStore, Upstream, UpstreamLoader, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.items import AnswerType, Component, ComponentKind, Item, make_item

HOMEPAGE = (
    "https://github.com/allenai/multimodalqa (dataset/ folder; images: final_dataset_images.zip "
    "from the README's link)"
)
TEXTS, IMAGES = "MMQA_texts.jsonl.gz", "MMQA_images.jsonl.gz"


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

    @property
    def upstream(self) -> Upstream:
        return Upstream(
            None,
            (f"MMQA_{self.split}.jsonl.gz", TEXTS, IMAGES),
            optional=("final_dataset_images.zip",),
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
        texts, images = self.contexts()
        for row in read_jsonl(self.root / f"MMQA_{self.split}.jsonl.gz"):
            if eligible(row, texts, images, self.min_text, self.min_images):
                yield Candidate(f"{self.name}::{row['qid']}", row)

    def build_many(self, candidates) -> list[Item]:
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
