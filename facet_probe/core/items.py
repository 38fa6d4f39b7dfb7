"""Canonical items: one question, its orderable components and its fixed context.

Every dataset loader produces `Item`s; every facet orders an item's components and renders them.
Validation happens at construction, so a malformed upstream row fails with a message that names
the item and the field instead of surfacing later as a wrong score.
"""

from __future__ import annotations

import base64
import hashlib
import json
import numbers
import re
import unicodedata
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from facet_probe.core.errors import ItemError


class ComponentKind(StrEnum):
    """The built-in component kinds (a plug-in facet may order a kind of its own: see `Component.kind`)."""

    CHOICE = "choice"
    TEXT_CHUNK = "text_chunk"
    DOCUMENT = "document"
    IMAGE = "image"
    DIALOG_TURN = "dialog_turn"
    FEW_SHOT = "few_shot"
    TOOL = "tool"


#: A plug-in facet's own component kind: a lower-case identifier.
PLUGIN_KIND = re.compile(r"[a-z][a-z0-9_]*")


class DuplicateChoices(StrEnum):
    """What a loader does with an MCQ item whose options repeat a text: which copy a model picked, and so an
    option-order flip between the copies, means nothing (docs/compatibility.md)."""

    REFUSE = "refuse"  # one line naming the item and the repeated option (the default)
    KEEP = "keep"  # FACET-PROBE v0.0.1: each copy is its own option, answers compared by source position


class AnswerType(StrEnum):
    MCQ = "mcq"  # answer is one of `choices`, given as a letter
    FREE = "free"  # short free-form answer (exact match after normalisation, or a judge)
    TOOL = "tool"  # the name of the function to call


class ImageRef(BaseModel):
    """An image by path or by bytes, always with the SHA-256 of its bytes (what the model saw)."""

    # Bytes travel as base64 in JSON (items.jsonl): model_dump(mode="json") / model_dump_json() and
    # model_validate_json() round-trip PNG bytes instead of failing on non-UTF-8 data.
    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    path: str | None = None
    data: bytes | None = Field(default=None, repr=False)
    sha256: str = ""

    @model_validator(mode="after")
    def _digest(self) -> ImageRef:
        if (self.path is None) == (self.data is None):
            raise ValueError("an image needs exactly one of `path` or `data`")
        if self.path is not None and not Path(self.path).is_file():
            raise ValueError(f"image file not found: {self.path}")
        if not self.sha256:
            object.__setattr__(self, "sha256", hashlib.sha256(self.read_bytes()).hexdigest())
        return self

    @classmethod
    def from_bytes(cls, data: bytes) -> ImageRef:
        return cls(data=data)

    @classmethod
    def from_path(cls, path: str | Path) -> ImageRef:
        return cls(path=str(path))

    def read_bytes(self) -> bytes:
        if self.path is not None:
            return Path(self.path).read_bytes()
        return self.data or b""  # one of them is set (the validator)

    def to_pil(self):
        """Decode to an RGB PIL image."""
        import io

        from PIL import Image

        with Image.open(io.BytesIO(self.read_bytes())) as img:
            return img.convert("RGB")

    def to_json(self) -> dict[str, str]:
        """JSON-safe form (bytes as base64) for item files."""
        if self.path is not None:
            return {"path": self.path, "sha256": self.sha256}
        return {"data_b64": base64.b64encode(self.read_bytes()).decode(), "sha256": self.sha256}


class Component(BaseModel):
    """One orderable (or fixed) unit: a choice, a chunk, a document, an image, a turn, a demo, a tool.

    `text` is the content; `title` is an optional heading (documents, tools); `role` is the speaker of
    a dialog turn; `answer` the answer of a few-shot demonstration; `image` the picture of an image
    component (an image component may also carry a caption in `text`).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    #: a built-in `ComponentKind`, or a plug-in facet's own kind: a lower-case identifier (e.g. "clue")
    kind: ComponentKind | str
    text: str = ""
    title: str | None = None
    role: str | None = None
    answer: str | None = None
    image: ImageRef | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> ComponentKind | str:
        """A built-in kind as its `ComponentKind`; any other lower-case identifier as itself (a plug-in's)."""
        if isinstance(v, str) and v in ComponentKind._value2member_map_:
            return ComponentKind(v)
        if isinstance(v, str) and PLUGIN_KIND.fullmatch(v):
            return v
        raise ValueError(f"component kind {v!r}: expected one of {', '.join(ComponentKind)} or a plug-in facet's "
                         "kind (a lower-case identifier: letters, digits, underscores)")

    @model_validator(mode="after")
    def _content(self) -> Component:
        if self.kind == ComponentKind.IMAGE and self.image is None:
            raise ValueError(f"component {self.id!r}: an image component needs `image`")
        # a choice is an MCQ option: whether it may be empty is the item's rule (Item, `as_reference`)
        if self.kind not in (ComponentKind.IMAGE, ComponentKind.CHOICE) and not self.text.strip() and self.image is None:
            raise ValueError(f"component {self.id!r} ({self.kind}) has empty text")
        if self.kind == ComponentKind.DIALOG_TURN and self.role not in ("user", "assistant"):
            raise ValueError(f"dialog turn {self.id!r}: role must be 'user' or 'assistant', got {self.role!r}")
        if self.kind == ComponentKind.FEW_SHOT and not (self.answer or "").strip():
            raise ValueError(f"few-shot demonstration {self.id!r} needs an `answer`")
        return self


#: Item metadata flag of an item drawn as the reference (`datasets.reference_sampling`): empty text kept.
AS_REFERENCE = "as_reference"
#: Item metadata flag of a question written as a whole prompt by another harness (lm-eval's `Question: ...`, a task's
#: description before it): the layout shows it as written, without its own "Question: " in front.
QUESTION_AS_WRITTEN = "question_as_written"


class Item(BaseModel):
    """One question with its orderable `components`, never-permuted `fixed` context, and its gold.

    For MCQ items `choices` lists the options in source order and `gold_index` points at the gold one;
    the option-order facet permutes the choices, every other facet keeps them in source order.
    For free-form items `gold_answer` (plus `answer_aliases`) is the reference answer; for tool items it
    is the gold function name.
    """

    model_config = ConfigDict(frozen=True)

    item_id: str
    dataset: str
    question: str
    components: tuple[Component, ...] = ()
    fixed: tuple[Component, ...] = ()
    choices: tuple[str, ...] = ()
    gold_index: int | None = None
    gold_answer: str | None = None
    answer_aliases: tuple[str, ...] = ()
    answer_type: AnswerType = AnswerType.MCQ
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("gold_index", mode="before")
    @classmethod
    def _gold_index_is_an_integer(cls, v: Any) -> Any:
        """An index is a whole number: pydantic's lax mode would read `true`, `1.0` or "1" as 1 without a word."""
        if v is None or (isinstance(v, numbers.Integral) and not isinstance(v, bool)):
            return v
        shown = json.dumps(v) if isinstance(v, bool | float | str) else repr(v)
        raise ValueError(f"expected a whole-number index into choices (0 = the first), got {shown} "
                         f"({'a boolean' if isinstance(v, bool) else type(v).__name__}); write the index, e.g. 1")

    @field_validator("question")
    @classmethod
    def _question_nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is empty")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Item:
        prefix = f"{self.dataset}::"
        own = self.metadata.get("stable_item_id", self.item_id)  # an item drawn as the reference keeps ours here
        if not own.startswith(prefix) or len(own) == len(prefix):
            raise ValueError(f"item_id {own!r} must look like '{prefix}<raw id>'")
        if (bad := unprintable(self.item_id)) is not None:
            raise ValueError(f"item_id {self.item_id!r} holds the control character U+{ord(bad):04X} (an id names "
                             "rows of CSV files and lines of reports and logs); remove it")
        name, _, raw = self.item_id.partition("::")
        if not (name and raw):  # the reference's own id (dataset.sampling=reference): '<its dataset name>::<raw id>'
            raise ValueError(f"item_id {self.item_id!r} must look like '<dataset name>::<raw id>'")
        ids = [c.id for c in (*self.components, *self.fixed)]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate component ids {dupes}")
        # drawn as the reference (dataset.sampling=reference): an empty option or answer kept, as it keeps them
        as_reference = self.metadata.get(AS_REFERENCE) is True
        if self.answer_type == AnswerType.MCQ:
            if len(self.choices) < 2:
                raise ValueError(f"an MCQ item needs at least 2 choices, got {len(self.choices)}")
            if not as_reference and any(not c.strip() for c in self.choices):
                raise ValueError("a choice is empty")
            if self.gold_index is None or not 0 <= self.gold_index < len(self.choices):
                raise ValueError(
                    f"gold_index {self.gold_index} is not among the {len(self.choices)} choices")
            if self.gold_answer is not None and self.gold_answer != self.choices[self.gold_index]:
                raise ValueError(
                    f"gold_answer {self.gold_answer!r} is not the choice at gold_index {self.gold_index} "
                    f"({self.choices[self.gold_index]!r})")
        elif self.gold_answer is None or not (as_reference or self.gold_answer.strip()):
            raise ValueError(f"a {self.answer_type} item needs a non-empty gold_answer")
        if self.answer_type == AnswerType.TOOL:
            names = [c.title for c in self.components if c.kind == ComponentKind.TOOL]
            if self.gold_answer not in names:
                raise ValueError(f"gold tool {self.gold_answer!r} is not among the tools {names}")
        return self

    @property
    def gold_choice(self) -> int:
        """The gold option's index (a multiple-choice item has one: the validator); a ValueError for another."""
        if self.gold_index is None:
            raise ValueError(f"item {self.item_id}: a {self.answer_type} item has no gold option")
        return self.gold_index

    @property
    def gold(self) -> str:
        """The gold answer as text: the gold choice for MCQ, else `gold_answer`."""
        if self.answer_type == AnswerType.MCQ:
            return self.choices[self.gold_choice]
        return self.gold_answer or ""  # set for every other type (the validator)

    @property
    def raw_id(self) -> str:
        return self.item_id.split("::", 1)[1]

    def components_of(self, *kinds: ComponentKind | str) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.kind in kinds)

    def images(self) -> list[ImageRef]:
        return [c.image for c in (*self.fixed, *self.components) if c.image is not None]


def make_item(**fields: Any) -> Item:
    """Build an item, turning pydantic's error into an `ItemError` that names the item."""
    try:
        return Item(**fields)
    except ValidationError as exc:
        where = shown_id(fields.get("item_id", "<no item_id>"))
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors())
        raise ItemError(f"invalid item {where}: {problems}") from None


def image_problem(image: ImageRef) -> str | None:
    """What is wrong with an image and what to do (unreadable file, not an image, damaged data, more pixels than
    Pillow decodes), or None if it can be decoded."""
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(image.read_bytes())) as img:
            img.verify()
    except Image.DecompressionBombError as exc:  # an Exception, not an OSError: the header claims a huge size
        return (f"is too large to decode ({bomb_size(exc)}, Pillow's guard against decompression bombs); resize "
                "the image (models downscale to a few megapixels anyway) or drop the item")
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
        return f"is not a readable image ({type(exc).__name__}: {exc}); replace the image or drop the item"
    return None


def bomb_size(exc: Exception) -> str:
    """'N pixels, more than the M Pillow decodes' from Pillow's DecompressionBombError (its text as a fallback)."""
    found = re.search(r"\((\d+) pixels\) exceeds limit of (\d+)", str(exc))
    if found is None:
        return str(exc)
    pixels, limit = (int(g) for g in found.groups())
    return f"its header claims {pixels:,} pixels, more than the {limit:,} Pillow decodes"


def check_images(items: list[Item]) -> None:
    """Raise on the first image that cannot be decoded, naming the item, the component and the file, so a bad
    image fails when items are loaded instead of in every call that shows it."""
    for item in items:
        for comp in (*item.fixed, *item.components):
            if comp.image is not None and (why := image_problem(comp.image)):
                source = comp.image.path or f"inline bytes, sha256 {comp.image.sha256[:12]}"
                raise ItemError(f"item {item.item_id}, component {comp.id!r} (its image): {source} {why}")


#: Unicode categories no id may hold: control and invisible format characters, line and paragraph separators,
#: lone surrogates (which no UTF-8 file can store).
UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unprintable(text: str) -> str | None:
    """The first character of `text` in an `UNPRINTABLE` category (a newline, a tab, a zero-width space), or None."""
    if text.isprintable():
        return None
    return next((ch for ch in text if unicodedata.category(ch) in UNPRINTABLE), None)


def shown_id(item_id: Any) -> str:
    """An id as a message shows it: as it is, or quoted with escapes where it holds a control character, so that
    the message stays one line."""
    return str(item_id) if unprintable(str(item_id)) is None else repr(item_id)


#: Compatibility forms that read as the same text as their plain form (full- and half-width letters, ligatures, no-break
#: spaces); superscripts, subscripts, fractions and circled or styled letters read otherwise ("x²" is not "x2").
SAME_READING = ("<wide>", "<narrow>", "<compat>", "<noBreak>")


def reading(text: str) -> str:
    """An option's text as a reader sees it: canonically composed (NFC), the compatibility forms of `SAME_READING`
    folded (NFKC), invisible format characters (a zero-width space, joiners) dropped and whitespace collapsed."""
    if not text.isascii():
        text = "".join(unicodedata.normalize("NFKC", ch) if unicodedata.decomposition(ch).startswith(SAME_READING)
                       else ch for ch in unicodedata.normalize("NFC", text) if unicodedata.category(ch) != "Cf")
    return " ".join(text.split())


def repeated_choices(item: Item) -> dict[str, list[int]]:
    """The option texts an item offers more than once as a reader sees them (`reading`: spacing, Unicode forms and
    invisible characters aside), each with its source indices."""
    where: dict[str, list[int]] = {}
    for i, choice in enumerate(item.choices):
        where.setdefault(reading(choice), []).append(i)
    return {text: idx for text, idx in where.items() if len(idx) > 1}


def choices_problem(choices: list[str] | tuple[str, ...]) -> str | None:
    """Why texts cannot be an MCQ item's options (fewer than 2, one empty, one offered twice as a reader sees it), or
    None: the skip reason of a loader's row (a flip between two identical options means nothing)."""
    if len(choices) < 2:
        return "fewer than 2 choices"
    if any(not str(c).strip() for c in choices):
        return "a choice is empty"
    if len({reading(str(c)) for c in choices}) < len(choices):
        return "two choices have the same text (a flip between them means nothing)"
    return None


def check_unique_ids(items: list[Item]) -> None:
    """Raise if two items share an id (manifests and trials are keyed by it)."""
    seen: set[str] = set()
    for item in items:
        if item.item_id in seen:
            raise ItemError(f"duplicate item id {item.item_id!r}")
        seen.add(item.item_id)
