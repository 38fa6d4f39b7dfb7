"""MMDocRAG (MMDocIR/MMDocRAG, `dev_15.jsonl` + `images.zip`): text and image quotes of a document.

The candidate quotes of a question (15 per line in `dev_15.jsonl`) become text chunks and images in
document order (page, then layout id); mixed_modality_order permutes them. Quotes listed in
`gold_quotes` are marked supporting. Gold: `answer_short` (free-form). `sampling: reference` builds the
reference's items instead (`reference_item`; docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.core.items import AS_REFERENCE, AnswerType, Component, ComponentKind, Item, make_item
from facet_probe.datasets.hub import Archive, Candidate, ImageStore, Upstream, UpstreamLoader, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

ARCHIVE = "images.zip"


def quotes_in_order(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Text and image quotes sorted by (page_id, layout_id), upstream order breaking ties."""
    quotes = [*(row.get("text_quotes") or []), *(row.get("img_quotes") or [])]
    return sorted(quotes, key=lambda q: (q.get("page_id") or 0, q.get("layout_id") or 0))


def eligible(row: dict[str, Any], min_text: int = 1, min_images: int = 1) -> bool:
    texts = [q for q in row.get("text_quotes") or [] if str(q.get("text") or "").strip()]
    images = [q for q in row.get("img_quotes") or [] if q.get("img_path")]
    return (
        len(texts) >= min_text
        and len(images) >= min_images
        and bool(str(row.get("answer_short") or "").strip())
    )


def unusable(row: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None."""
    return None if str(row.get("question") or "").strip() else "the question is empty"


# --------------------------------------------------------------------------- as the reference (`sampling: reference`)
REFERENCE_MIN = 3  #: text quotes, image quotes (and images found) the reference needs


def reference_eligible(row: dict[str, Any]) -> bool:
    """The reference's filter: 3+ text and 3+ image quotes, a text and an image among the gold quotes."""
    gold = [str(g) for g in row.get("gold_quotes") or []]
    return (len(row.get("text_quotes") or []) >= REFERENCE_MIN and len(row.get("img_quotes") or []) >= REFERENCE_MIN
            and any(g.startswith("text") for g in gold) and any(g.startswith("image") for g in gold))


def reference_images(row: dict[str, Any], archive: Archive) -> list[str]:
    """The archive members of the image quotes, in upstream order (a path not in the archive left out)."""
    paths = (q.get("img_path") or q.get("path") for q in row.get("img_quotes") or [])
    return [p for p in paths if p and archive.first((p,)) is not None]


def reference_texts(row: dict[str, Any]) -> list[str]:
    """Every text quote in upstream order, stripped (an empty one kept)."""
    return [str(q.get("text", "")).strip() for q in row.get("text_quotes") or []]


def reference_gold(row: dict[str, Any]) -> str:
    """`answer_short`, else `answer_interleaved` up to its first "." (200 characters at most)."""
    gold = str(row.get("answer_short") or "").strip()
    interleaved = str(row.get("answer_interleaved") or "")
    return gold or (interleaved.split(".")[0][:200] if interleaved else "")


def reference_unusable(row: dict[str, Any]) -> str | None:
    """Why a row the reference keeps cannot be an item (skipped and counted), or None."""
    if not str(row.get("question", "")).strip():
        return "the question is empty"
    if not all(reference_texts(row)):
        return "a text quote is empty (the reference shows it empty)"
    return None


def reference_item(row: dict[str, Any], archive: Archive, dataset: str = "mmdocrag") -> Item:
    """The reference's item: the text quotes, then the images found, components `text_<i>`/`image_<i>`."""
    texts = [Component(id=f"text_{i}", kind=ComponentKind.TEXT_CHUNK, text=t) for i, t in enumerate(reference_texts(row))]
    images = [Component(id=f"image_{len(texts) + i}", kind=ComponentKind.IMAGE, image=image, metadata={"img_path": m})
              for i, (m, image) in enumerate(zip(row["ref_images"], archive.read(row["ref_images"]), strict=True))]
    return make_item(item_id=f"{dataset}::{row.get('q_id')}", dataset=dataset, question=str(row.get("question", "")),
                     components=(*texts, *images), gold_answer=reference_gold(row), answer_type=AnswerType.FREE,
                     metadata={AS_REFERENCE: True, "doc_name": row.get("doc_name")})


def row_to_item(row: dict[str, Any], images: ImageStore, dataset: str = "mmdocrag") -> Item:
    item_id = f"{dataset}::{row['q_id']}"
    gold = set(row.get("gold_quotes") or [])
    components = []
    for q in quotes_in_order(row):
        meta = {
            "supporting": q["quote_id"] in gold,
            "page_id": q.get("page_id"),
            "layout_id": q.get("layout_id"),
        }
        if q.get("img_path"):
            components.append(
                Component(
                    id=q["quote_id"],
                    kind=ComponentKind.IMAGE,
                    image=images.get(q["img_path"], item_id),
                    metadata={**meta, "img_path": q["img_path"], "description": q.get("img_description")},
                )
            )
        elif str(q.get("text") or "").strip():
            components.append(
                Component(id=q["quote_id"], kind=ComponentKind.TEXT_CHUNK, text=q["text"], metadata=meta)
            )
    return make_item(
        item_id=item_id,
        dataset=dataset,
        question=row["question"],
        components=tuple(components),
        gold_answer=row["answer_short"],
        answer_type=AnswerType.FREE,
        metadata={
            k: row.get(k)
            for k in ("doc_name", "domain", "question_type", "evidence_modality_type", "answer_interleaved")
        },
    )


class MMDocRAG(UpstreamLoader):
    """MMDocRAG dev questions with their 15 (or 20) candidate quotes."""

    facets = ("mixed_modality_order",)
    source = "MMDocIR/MMDocRAG"
    license = "Apache-2.0"

    def __init__(
        self, name: str = "mmdocrag", quotes: int = 15, min_text: int = 1, min_images: int = 1, **rest
    ) -> None:
        super().__init__(name, **rest)
        if quotes not in (15, 20):
            raise ValueError(
                f"dataset {name}: quotes must be 15 or 20 (dev_15.jsonl / dev_20.jsonl), got {quotes}"
            )
        self.quotes, self.min_text, self.min_images = quotes, min_text, min_images
        self._archive: Archive | None = None

    @property
    def qa_file(self) -> str:
        return f"dev_{self.quotes}.jsonl"

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (self.qa_file,), optional=(ARCHIVE,))

    #: the reference names an item by `doc_id`, else `id`, else its rank in the selection (rows have neither)
    reference = ReferenceSelection("mmdocrag", Draw.ELIGIBLE, 200, seed=42, id_fields=("doc_id", "id"))

    def candidates(self) -> Iterator[Candidate]:
        for row in read_jsonl(self.root / self.qa_file):
            if self.as_reference:
                if reference_eligible(row):
                    yield Candidate(f"{self.name}::{row.get('q_id')}", row)
            elif eligible(row, self.min_text, self.min_images) and not self.skip(unusable(row)):
                yield Candidate(f"{self.name}::{row['q_id']}", row)

    def reference_archive(self) -> Archive:
        """`images.zip`, which the reference reads (members by their exact `img_path`)."""
        if self._archive is None:
            self._archive = Archive.found(self.name, self.root, (ARCHIVE,), self.upstream.url)
        return self._archive

    def reference_pick(self, candidate: Candidate) -> Candidate | None:
        """The reference keeps a row only when 3 of its image quotes are in the archive."""
        found = reference_images(candidate.row, self.reference_archive())
        return Candidate(candidate.item_id, {**candidate.row, "ref_images": found}) if len(found) >= REFERENCE_MIN else None

    def reference_unusable(self, candidate: Candidate) -> str | None:
        return reference_unusable(candidate.row)

    def build_many(self, candidates) -> list[Item]:
        if self.as_reference:
            return [reference_item(c.row, self.reference_archive(), self.name) for c in candidates]
        store = ImageStore(
            self.name,
            folders=[self.root / "images"],
            zips=[self.root / "images.zip"],
            hint=f"fetch images.zip from {self.upstream.url} into {self.root}",
        )
        return [row_to_item(c.row, store, self.name) for c in candidates]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
