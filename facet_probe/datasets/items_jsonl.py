"""items_jsonl: audit your own items from a JSONL file (`dataset=items_jsonl dataset.path=<file>`).

Two line formats are accepted, detected per line:

- canonical: one `Item.model_dump(mode="json")` per line (a run folder's `items.jsonl`). Images are
  `{"path": ...}` (relative to the JSONL file, or absolute), `{"data": <base64>}` or
  `{"data_b64": <base64>}`; a given `sha256` is checked against the bytes.
- FACET-PROBE v0.0.1 `AuditItem` lines: `item_id`, `dataset`, `components` (`component_id`, `kind`
  in text|image|table|document|choice, `content_ref`, `label`, extra keys), `question_ref`,
  `choices`, `gold` (a choice component id, a choice text, or a displayed letter), extra keys. That
  release stores content by reference, so text must be resolvable: an inline `question` / component
  `text` (or `title`), a `text:<literal>` reference, or a file path relative to the JSONL file.
  Opaque references fail with a message, unless `refs_as_text=true` uses them verbatim (smoke tests).

Every error names the file, the line and the field. An MCQ item whose options repeat a text is refused
(`duplicate_choices=keep` keeps it, as FACET-PROBE v0.0.1 does: each copy its own option).
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
from pathlib import Path
from typing import Any, ClassVar

from facet_probe.core.items import (
    ComponentKind,
    DuplicateChoices,
    ImageRef,
    Item,
    ItemError,
    make_item,
    repeated_choices,
    shown_id,
)
from facet_probe.datasets.base import DatasetLoader, DatasetUnavailable

FP_FORMAT = "facet-probe-0.0.1"
#: FACET-PROBE v0.0.1 component kinds -> ours ("choice" becomes the item's choices).
FP_KINDS = {"text": ComponentKind.TEXT_CHUNK, "table": ComponentKind.TEXT_CHUNK,
            "document": ComponentKind.DOCUMENT, "image": ComponentKind.IMAGE}
FP_COMPONENT_FIELDS = {"component_id", "kind", "content_ref", "label", "text", "content", "title",
                       "image_path", "image_b64"}
FP_ITEM_FIELDS = {"item_id", "dataset", "components", "question_ref", "question", "choices", "gold"}


class LineError(ItemError):
    """A line of an items file is malformed; the message starts with `file:line`."""


def decode_utf8(data: bytes, where: str, offset: int = 0) -> str:
    """The text of `data` (a line at byte `offset` of its file, or a whole file), less the byte-order mark some
    editors start a UTF-8 file with; bytes that are not UTF-8 raise a ValueError naming the first bad byte and
    its offset in the file."""
    try:
        return data.decode("utf-8-sig" if offset == 0 else "utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        raise ValueError(f"{where}: not valid UTF-8 (byte 0x{bad} at byte offset {offset + exc.start} of the file); "
                         "save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 old.jsonl > new.jsonl`") from None


def _decode_b64(text: str, where: str) -> bytes:
    """Standard or URL-safe base64 (pydantic writes URL-safe), padding optional."""
    if not isinstance(text, str):
        raise ValueError(f"{where}: expected a base64 string, got {type(text).__name__}")
    normal = text.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{where}: not valid base64 image data") from None


class ItemsJsonl(DatasetLoader):
    """Items from a local JSONL file; every facet is allowed, plug-ins' too (each checks its items itself)."""

    facets: ClassVar[tuple[str, ...]] = ("*",)
    source: ClassVar[str] = "a local JSONL file (canonical items or FACET-PROBE v0.0.1 item JSONL)"
    license: ClassVar[str] = "that of the file's content"
    path: Path  # required: __init__ refuses None

    def __init__(self, name: str, path: str | None = None, n: int | None = None, seed: int = 42,
                 refs_as_text: bool = False, duplicate_choices: DuplicateChoices | str = DuplicateChoices.REFUSE,
                 **options) -> None:
        super().__init__(name, path, n, seed, **options)
        if self.path is None:
            raise ValueError(f"dataset {name}: give the items file, e.g. dataset={name} dataset.path=items.jsonl")
        self.refs_as_text = refs_as_text
        try:
            self.duplicate_choices = DuplicateChoices(str(duplicate_choices))
        except ValueError:
            raise ValueError(f"dataset {name}: duplicate_choices={duplicate_choices!r}; valid: "
                             f"{', '.join(DuplicateChoices)}") from None

    def load_all(self) -> list[Item]:
        if not self.path.is_file():
            raise DatasetUnavailable(f"items file not found: {self.path} (dataset.path must name a JSONL file "
                                     "with one item per line)")
        items: list[Item] = []
        first_line: dict[str, int] = {}
        offset = 0
        with self.path.open("rb") as fh:  # decoded line by line, so a byte that is not UTF-8 names its line
            for lineno, raw in enumerate(fh, 1):
                try:
                    line = decode_utf8(raw, f"{self.path}:{lineno}", offset)
                except ValueError as exc:
                    raise LineError(str(exc)) from None
                offset += len(raw)
                if not line.strip():
                    continue
                item = self.parse_line(line, lineno)
                if item.item_id in first_line:
                    raise LineError(f"{self.path}:{lineno}: item_id {item.item_id!r} repeats line "
                                    f"{first_line[item.item_id]}; item ids must be unique")
                first_line[item.item_id] = lineno
                items.append(item)
        if not items:
            raise ItemError(f"{self.path}: no items (the file is empty)")
        return items

    def parse_line(self, line: str, lineno: int) -> Item:
        """One line -> one item; any problem becomes a `LineError` naming file, line and field."""
        where = f"{self.path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LineError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise LineError(f"{where}: expected a JSON object per line, got {type(row).__name__}")
        try:
            item = self._from_fp(row) if is_fp_row(row) else self._from_canonical(row)
            self.check_choices(item)
            return item
        except (ItemError, ValueError, KeyError, TypeError) as exc:
            message = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            item_id = row.get("item_id")
            named = f" (item {shown_id(item_id)})" if item_id is not None and shown_id(item_id) not in message else ""
            raise LineError(f"{where}: {message}{named}") from None

    def check_choices(self, item: Item) -> None:
        """Refuse an item whose options repeat a text (unless `duplicate_choices=keep`): which copy was chosen
        means nothing, so neither does an option-order flip between them."""
        repeated = repeated_choices(item)
        if not repeated or self.duplicate_choices is DuplicateChoices.KEEP:
            return
        text, where = next(iter(repeated.items()))
        forms = list(dict.fromkeys(item.choices[i] for i in where))
        alike = (f": {', '.join(map(ascii, forms))}, which differ only in spacing, Unicode form or invisible "
                 "characters" if len(forms) > 1 else "")
        raise ValueError(f"item {item.item_id} offers the option {text!r} {len(where)} times (choices "
                         f"{', '.join(map(str, where))}{alike}): a flip between identical options means nothing; make the "
                         "options distinct or drop the item (dataset.duplicate_choices=keep audits it as "
                         "FACET-PROBE v0.0.1 does, each copy its own option)")

    # --- canonical lines -------------------------------------------------------------------------

    def _from_canonical(self, row: dict[str, Any]) -> Item:
        if unknown := sorted(set(row) - set(Item.model_fields)):
            raise ValueError(unknown_field_message(unknown[0]))
        row = dict(row)
        for group in ("components", "fixed"):
            comps = row.get(group) or []
            if not isinstance(comps, list):
                raise ValueError(f"{group}: expected a list of components")
            row[group] = [self._canonical_component(c, f"{group}[{i}]") for i, c in enumerate(comps)]
        return make_item(**row)

    def _canonical_component(self, comp: Any, where: str) -> Any:
        if not isinstance(comp, dict) or not comp.get("image"):
            return comp
        return {**comp, "image": self.image_ref(comp["image"], f"{where}.image")}

    def image_ref(self, spec: Any, where: str) -> ImageRef:
        """An image from {"path"} (relative to the file), {"data"} or {"data_b64"}, sha256 checked."""
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: expected an object with `path` or `data`")
        if spec.get("path"):
            ref = ImageRef.from_path(self.resolve_path(spec["path"], f"{where}.path"))
        elif spec.get("data") or spec.get("data_b64"):
            key = "data" if spec.get("data") else "data_b64"
            ref = ImageRef.from_bytes(_decode_b64(spec[key], f"{where}.{key}"))
        else:
            raise ValueError(f"{where}: an image needs `path`, `data` (base64) or `data_b64`")
        expected = spec.get("sha256")
        if expected and expected != ref.sha256:
            raise ValueError(f"{where}: sha256 {expected} does not match the image bytes ({ref.sha256}); "
                             "the file changed since the item was written")
        return ref

    def resolve_path(self, raw: str, where: str) -> Path:
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else self.path.parent / path
        if not path.is_file():
            raise ValueError(f"{where}: file not found: {path} (paths are relative to {self.path.parent})")
        return path

    # --- FACET-PROBE v0.0.1 lines ------------------------------------------------------------------

    def _from_fp(self, row: dict[str, Any]) -> Item:
        dataset = str(row.get("dataset") or self.name)
        raw_id = str(row["item_id"])
        item_id = raw_id if raw_id.startswith(f"{dataset}::") else f"{dataset}::{raw_id}"
        question = row.get("question") or self._text_ref(row.get("question_ref"), "question_ref")
        comps = row.get("components") or []
        if not isinstance(comps, list):
            raise ValueError("components: expected a list")
        choice_comps = [c for c in comps if isinstance(c, dict) and c.get("kind") == "choice"]
        components = tuple(self._fp_component(c, f"components[{i}]")
                           for i, c in enumerate(comps) if c not in choice_comps)
        choices = tuple(str(c) for c in row.get("choices") or ())
        if not choices and choice_comps:
            choices = tuple(self._fp_text(c, f"components[{comps.index(c)}]") for c in choice_comps)
        meta = {k: v for k, v in row.items() if k not in FP_ITEM_FIELDS}
        meta["source_format"] = FP_FORMAT
        fields: dict[str, Any] = {"item_id": item_id, "dataset": dataset, "question": question,
                                  "components": components, "metadata": meta}
        gold = row.get("gold")
        if choices:
            fields.update(choices=choices, gold_index=fp_gold_index(gold, choices, choice_comps))
        else:
            if gold is None or not str(gold).strip():
                raise ValueError("gold: an item without choices needs `gold`, the short reference answer")
            fields.update(answer_type="free", gold_answer=str(gold))
        return make_item(**fields)

    def _fp_component(self, comp: Any, where: str) -> dict[str, Any]:
        if not isinstance(comp, dict):
            raise ValueError(f"{where}: expected an object")
        kind = comp.get("kind", "text")
        if kind not in FP_KINDS:
            raise ValueError(f"{where}.kind: {kind!r} has no canonical counterpart (known: "
                             f"{', '.join([*FP_KINDS, 'choice'])}); split 'mixed' into text and image components")
        out: dict[str, Any] = {"id": str(comp["component_id"]), "kind": FP_KINDS[kind]}
        meta = {k: v for k, v in comp.items() if k not in FP_COMPONENT_FIELDS}
        meta.update(fp_kind=kind, fp_label=comp.get("label"), content_ref=comp.get("content_ref"))
        out["metadata"] = meta
        if comp.get("title"):
            out["title"] = str(comp["title"])
        if FP_KINDS[kind] == ComponentKind.IMAGE:
            out["image"] = self._fp_image(comp, where)
            out["text"] = str(comp.get("text") or "")
        else:
            out["text"] = self._fp_text(comp, where)
        return out

    def _fp_text(self, comp: dict[str, Any], where: str) -> str:
        inline = comp.get("text") or comp.get("content")
        if inline:
            return str(inline)
        return self._text_ref(comp.get("content_ref"), f"{where}.content_ref")

    def _fp_image(self, comp: dict[str, Any], where: str) -> ImageRef:
        if comp.get("image_b64"):
            return ImageRef.from_bytes(_decode_b64(comp["image_b64"], f"{where}.image_b64"))
        key = "image_path" if comp.get("image_path") else "content_ref"
        raw = comp.get(key)
        if not raw:
            raise ValueError(f"{where}: an image component needs `image_path`, `image_b64` or a file `content_ref`")
        return ImageRef.from_path(self.resolve_path(str(raw).removeprefix("file:"), f"{where}.{key}"))

    def _text_ref(self, ref: Any, where: str) -> str:
        """Resolve a text reference: `text:<literal>`, a file next to the JSONL, else (opt-in) verbatim."""
        if ref is None or not str(ref).strip():
            raise ValueError(f"{where}: no text (give it inline, or a resolvable reference)")
        ref = str(ref)
        if ref.startswith("text:"):
            return ref.removeprefix("text:")
        candidate = self.path.parent / ref.removeprefix("file:")
        if "://" not in ref and candidate.is_file():
            return decode_utf8(candidate.read_bytes(), f"{where}: {candidate}").strip()
        if self.refs_as_text:
            return ref
        raise ValueError(f"{where}: {ref!r} is a reference to upstream content that facet_probe cannot "
                         "resolve; put the text inline (`question` on the item, `text` on a component), use a "
                         "`text:` reference or a file path, or set dataset.refs_as_text=true to use the "
                         "reference itself as the text (smoke tests only)")


def unknown_field_message(name: str) -> str:
    """A line's key that no item field has (a misspelling would otherwise be dropped without a word)."""
    near = difflib.get_close_matches(name, Item.model_fields, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return (f"unknown field {name!r}{hint}: an item's fields are {', '.join(Item.model_fields)}; keep your own keys "
            "under metadata (python -m facet_probe schema items prints the schema)")


def is_fp_row(row: dict[str, Any]) -> bool:
    """Does this line use the FACET-PROBE v0.0.1 AuditItem layout (not our canonical one)?"""
    comps = row.get("components")
    if isinstance(comps, list) and any(isinstance(c, dict) and "component_id" in c for c in comps):
        return True
    return "question_ref" in row or ("gold" in row and "gold_index" not in row and "answer_type" not in row)


def fp_gold_index(gold: Any, choices: tuple[str, ...], choice_comps: list[dict[str, Any]]) -> int:
    """The gold choice from a v0.0.1 `gold`: a choice component id, a choice text, or a letter."""
    if gold is None:
        raise ValueError("gold: an MCQ item needs `gold` (a choice component id, a choice text or a letter)")
    gold = str(gold)
    ids = [str(c.get("component_id")) for c in choice_comps]
    if gold in ids and len(ids) == len(choices):
        return ids.index(gold)
    if gold in choices:
        return choices.index(gold)
    labels = [str(c.get("label") or "") for c in choice_comps] if len(choice_comps) == len(choices) else []
    if gold in labels:
        return labels.index(gold)
    letters = [chr(ord("A") + i) for i in range(len(choices))]
    if gold.upper() in letters and len(gold) == 1:
        return letters.index(gold.upper())
    raise ValueError(f"gold: {gold!r} is neither a choice component id {ids}, a choice {list(choices)}, "
                     f"nor a letter {letters}")

