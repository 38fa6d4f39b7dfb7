"""MMDocRAG (MMDocIR/MMDocRAG, `dev_15.jsonl` + `images.zip`): text and image quotes of a document.

The candidate quotes of a question (15 per line in `dev_15.jsonl`) become text chunks and images in
document order (page, then layout id); mixed_modality_order permutes them. Quotes listed in
`gold_quotes` are marked supporting. Gold: `answer_short` (free-form).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from facet_probe.datasets.hub import Candidate, ImageStore, Upstream, UpstreamLoader, read_jsonl
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection
from facet_probe.items import AnswerType, Component, ComponentKind, Item, make_item


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

    @property
    def qa_file(self) -> str:
        return f"dev_{self.quotes}.jsonl"

    @property
    def upstream(self) -> Upstream:
        return Upstream(self.source, (self.qa_file,), optional=("images.zip",))

    #: the reference names an item by `doc_id`, else `id`, else its rank in the selection (rows have neither)
    reference = ReferenceSelection("mmdocrag", Draw.ELIGIBLE, 200, seed=42, id_fields=("doc_id", "id"))

    def candidates(self) -> Iterator[Candidate]:
        for row in read_jsonl(self.root / self.qa_file):
            if eligible(row, self.min_text, self.min_images):
                yield Candidate(f"{self.name}::{row['q_id']}", row)

    def build_many(self, candidates) -> list[Item]:
        store = ImageStore(
            self.name,
            folders=[self.root / "images"],
            zips=[self.root / "images.zip"],
            hint=f"fetch images.zip from {self.upstream.url} into {self.root}",
        )
        return [row_to_item(c.row, store, self.name) for c in candidates]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
