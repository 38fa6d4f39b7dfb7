"""MRAMG-Bench recipe subset (MRAMG/MRAMG-Bench): recipe documents as interleaved text and images.

Each question's provenance documents (`doc_recipe.jsonl`) are split at their `<PIC>` markers into
alternating text chunks and images (the i-th marker is the document's i-th `images_list` entry);
mixed_modality_order permutes these parts. Images come from `IMAGE.zip` (or the unpacked `IMAGE/`
folder), under a `RECIPE` folder; `images_info/recipe_imgs_collection.json` maps image ids to files
when present. Gold: the `ground_truth` answer with its `<PIC>` markers removed (free-form).
`sampling: reference` builds the reference's items instead (`reference_item`; docs/compatibility.md).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from facet_probe.core.items import (
    AS_REFERENCE,
    AnswerType,
    Component,
    ComponentKind,
    Item,
    ItemError,
    make_item,
)
from facet_probe.datasets.hub import (
    IMAGE_SUFFIXES,
    Archive,
    Candidate,
    ImageStore,
    Upstream,
    UpstreamLoader,
    read_jsonl,
)
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection

QA_FILE, DOC_FILE, ARCHIVE = "recipe_mqa.jsonl", "doc_recipe.jsonl", "IMAGE.zip"
MARKER = "<PIC>"


def parse_doc(record: Any) -> tuple[str, str, list[Any]]:
    """(id, content, images_list) from a document line (a JSON object or an [id, content, images] array)."""
    if isinstance(record, dict):
        return str(record["id"]), record["content"], list(record.get("images_list") or [])
    if isinstance(record, list) and len(record) >= 3:
        return str(record[0]), record[1], list(record[2] or [])
    raise ItemError(f"{DOC_FILE}: unexpected document record {str(record)[:80]!r}")


def split_doc(content: str, images: list[Any]) -> list[tuple[str, Any]] | None:
    """Alternating ("text", str) / ("image", image id) parts, or None if markers and images disagree."""
    pieces = content.split(MARKER)
    if len(pieces) - 1 != len(images):
        return None
    parts: list[tuple[str, Any]] = []
    for i, piece in enumerate(pieces):
        if piece.strip():
            parts.append(("text", piece.strip()))
        if i < len(images):
            parts.append(("image", images[i]))
    return parts


def question_parts(
    row: dict[str, Any], docs: dict[str, tuple[str, list[Any]]]
) -> list[tuple[str, str, Any]] | None:
    """(doc id, kind, value) for every part of every provenance document, or None if one is unusable."""
    out: list[tuple[str, str, Any]] = []
    for doc_id in row.get("provenance") or []:
        doc = docs.get(str(doc_id))
        parts = split_doc(*doc) if doc else None
        if parts is None:
            return None
        out += [(str(doc_id), kind, value) for kind, value in parts]
    return out


def eligible(
    parts: list[tuple[str, str, Any]] | None,
    min_text: int = 1,
    min_images: int = 1,
    max_components: int | None = None,
) -> bool:
    if not parts:
        return False
    n_text = sum(1 for _, k, _ in parts if k == "text")
    n_img = len(parts) - n_text
    return (
        n_text >= min_text
        and n_img >= min_images
        and (max_components is None or len(parts) <= max_components)
    )


def clean_answer(text: str) -> str:
    return re.sub(r"\s{2,}", " ", str(text).replace(MARKER, " ")).strip()


def empty_question(row: dict[str, Any]) -> str | None:
    """"the question is empty" (a row no item can hold, skipped and counted), or None."""
    return None if str(row.get("question") or "").strip() else "the question is empty"


def unusable(row: dict[str, Any]) -> str | None:
    """Why an eligible row cannot be an item (skipped and counted), or None."""
    return empty_question(row) or (None if clean_answer(row.get("ground_truth") or "") else "the answer is empty")


# --------------------------------------------------------------------------- as the reference (`sampling: reference`)
REFERENCE_MIN = 3  #: text parts and image parts the reference needs
REFERENCE_MEMBER = "IMAGE/images/RECIPE/{}.jpg"  #: where the reference reads an image id in IMAGE.zip


def whole_number(value: Any) -> int | None:
    """`int(value)` as the reference keys documents, or None where it has no such number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reference_documents(records: Iterator[Any]) -> dict[int | None, str]:
    """The reference's documents: number -> content (arrays and objects; a later line wins)."""
    docs: dict[int | None, str] = {}
    for entry in records:
        if isinstance(entry, list) and len(entry) >= 2:
            docs[whole_number(entry[0])] = str(entry[1])
        elif isinstance(entry, dict) and "id" in entry and "content" in entry:
            docs[whole_number(entry["id"])] = str(entry["content"])
    docs.pop(None, None)
    return docs


def reference_parts(row: dict[str, Any], docs: dict[int | None, str]) -> list[tuple[str, Any]] | None:
    """The first provenance document split at its markers, ("image", slot) for the i-th marker, when it has
    3+ text and 3+ image parts (the reference's filter), else None."""
    provenance = row.get("provenance") or []
    content = docs.get(whole_number(provenance[0]), "") if provenance else ""
    parts = split_doc(content, list(range(content.count(MARKER))))
    n_img = sum(kind == "image" for kind, _ in parts or [])
    return parts if parts and n_img >= REFERENCE_MIN and len(parts) - n_img >= REFERENCE_MIN else None


def reference_images(row: dict[str, Any], n_slots: int) -> list[str] | None:
    """The archive member of each image slot, from the question's `images_list` padded with its last entry;
    None when the list is empty."""
    images = list(row.get("images_list") or [])
    if not images:
        return None
    images += images[-1:] * (n_slots - len(images))
    return [REFERENCE_MEMBER.format(images[slot]) for slot in range(n_slots)]


def reference_item(row: dict[str, Any], archive: Archive, dataset: str = "mramg") -> Item:
    """The reference's item: the document's parts in order (`text_<i>`/`image_<i>`), the answer as stored."""
    pictures = iter(archive.read(row["ref_images"]))
    components = [Component(id=f"text_{i}", kind=ComponentKind.TEXT_CHUNK, text=value) if kind == "text" else
                  Component(id=f"image_{i}", kind=ComponentKind.IMAGE, image=next(pictures),
                            metadata={"member": row["ref_images"][value]})
                  for i, (kind, value) in enumerate(row["ref_parts"])]
    return make_item(item_id=f"{dataset}::{row.get('id')}", dataset=dataset, question=str(row.get("question", "")),
                     components=tuple(components), gold_answer=str(row.get("ground_truth", "")),
                     answer_type=AnswerType.FREE, metadata={AS_REFERENCE: True, "doc_id": row["ref_doc"]})


class MRAMG(UpstreamLoader):
    """MRAMG-Bench recipe questions over their provenance documents, split at image markers."""

    facets = ("mixed_modality_order",)
    source = "MRAMG/MRAMG-Bench"
    license = "Apache-2.0"
    upstream = Upstream(source, (QA_FILE, DOC_FILE), optional=(ARCHIVE,))

    def __init__(
        self,
        name: str = "mramg",
        min_text: int = 1,
        min_images: int = 1,
        max_components: int | None = None,
        **rest,
    ) -> None:
        super().__init__(name, **rest)
        self.min_text, self.min_images, self.max_components = min_text, min_images, max_components
        self._archive: Archive | None = None

    def documents(self) -> dict[str, tuple[str, list[Any]]]:
        docs = {}
        for record in read_jsonl(self.root / DOC_FILE):
            doc_id, content, images = parse_doc(record)
            docs[doc_id] = (content, images)
        return docs

    reference = ReferenceSelection("mramg", Draw.ELIGIBLE, 197, seed=42)

    def candidates(self) -> Iterator[Candidate]:
        if self.as_reference:
            yield from self.reference_rows()
            return
        docs = self.documents()
        for row in read_jsonl(self.root / QA_FILE):
            parts = question_parts(row, docs)
            if eligible(parts, self.min_text, self.min_images, self.max_components) and not self.skip(unusable(row)):
                yield Candidate(f"{self.name}::{row['id']}", {**row, "parts": parts})

    def reference_rows(self) -> Iterator[Candidate]:
        """Rows the reference's filter passes, with their parts (its id falls back to `recipe::<doc>`)."""
        docs = reference_documents(read_jsonl(self.root / DOC_FILE))
        for row in read_jsonl(self.root / QA_FILE):
            if (parts := reference_parts(row, docs)) is not None:
                doc = whole_number(row["provenance"][0])
                yield Candidate(f"{self.name}::{row.get('id')}",
                                {**row, "id": row.get("id", f"recipe::{doc}"), "ref_parts": parts, "ref_doc": doc})

    def reference_archive(self) -> Archive:
        """`IMAGE.zip`, which the reference reads (members `IMAGE/images/RECIPE/<id>.jpg`)."""
        if self._archive is None:
            self._archive = Archive.found(self.name, self.root, (ARCHIVE,), self.upstream.url)
        return self._archive

    def reference_pick(self, candidate: Candidate) -> Candidate | None:
        """The reference keeps a row only when its `images_list` is not empty and every slot's image is found."""
        slots = sum(kind == "image" for kind, _ in candidate.row["ref_parts"])
        members = reference_images(candidate.row, slots)
        if members is None or any(self.reference_archive().first((m,)) is None for m in members):
            return None
        return Candidate(candidate.item_id, {**candidate.row, "ref_images": members})

    def reference_unusable(self, candidate: Candidate) -> str | None:
        return empty_question(candidate.row)  # an empty answer is kept, as the reference keeps it

    def image_files(self) -> tuple[ImageStore, dict[str, Any]]:
        store = ImageStore(
            self.name,
            folders=[self.root / "IMAGE"],
            zips=[self.root / "IMAGE.zip"],
            within="RECIPE",
            hint=f"fetch IMAGE.zip from {self.upstream.url} into {self.root}",
        )
        return store, read_collection(self.root)

    def build_many(self, candidates) -> list[Item]:
        if self.as_reference:
            return [reference_item(c.row, self.reference_archive(), self.name) for c in candidates]
        store, collection = self.image_files()
        return [self._item(c, store, collection) for c in candidates]

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]

    def _item(self, c: Candidate, store: ImageStore, collection: dict[str, Any]) -> Item:
        row = c.row
        components = []
        for j, (doc_id, kind, value) in enumerate(row["parts"]):
            if kind == "text":
                components.append(
                    Component(
                        id=f"d{doc_id}_{j}",
                        kind=ComponentKind.TEXT_CHUNK,
                        text=value,
                        metadata={"doc_id": doc_id},
                    )
                )
            else:
                info = collection.get(str(value)) or {}
                image = store.get(image_name(value, info, store), c.item_id)
                components.append(
                    Component(
                        id=f"d{doc_id}_{j}",
                        kind=ComponentKind.IMAGE,
                        image=image,
                        metadata={
                            "doc_id": doc_id,
                            "image_id": str(value),
                            "caption": info.get("image_caption"),
                        },
                    )
                )
        return make_item(
            item_id=c.item_id,
            dataset=self.name,
            question=row["question"],
            components=tuple(components),
            gold_answer=clean_answer(row["ground_truth"]),
            answer_type=AnswerType.FREE,
            metadata={
                "provenance": [str(p) for p in row.get("provenance") or []],
                "answer_images": [str(i) for i in row.get("images_list") or []],
            },
        )


def image_name(image_id: Any, info: dict[str, Any], store: ImageStore) -> str:
    """The file for an image id: its `image_path` in the collection, else `<id>.<ext>` found in the store."""
    if info.get("image_path"):
        return str(info["image_path"])
    for ext in IMAGE_SUFFIXES:
        for name in (f"{image_id}{ext}", f"{image_id}{ext.upper()}"):
            if name in store:
                return name
    return f"{image_id}.jpg"


def read_collection(root: Path) -> dict[str, Any]:
    """`recipe_imgs_collection.json` (image id -> caption, file) from `IMAGE/` or `IMAGE.zip`, if present."""
    suffix = "images_info/recipe_imgs_collection.json"
    folder = root / "IMAGE"
    if folder.is_dir():
        for f in folder.rglob("recipe_imgs_collection.json"):
            return json.loads(f.read_text(encoding="utf-8"))
    archive = root / "IMAGE.zip"
    if archive.is_file():
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith(suffix):
                    return json.loads(zf.read(name).decode("utf-8"))
    return {}
