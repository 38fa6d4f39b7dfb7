"""hf: any Hugging Face dataset as items, by a mapping of its columns (`dataset=hf dataset.path=<hub id, folder or
file> dataset.columns.<key>=<column>`; docs/datasets.md#hf).

A column reference is a column name, or a dotted path into a struct column (`choices.text`). The mapping says which
column holds the question, the options (one list column, or several columns), the answer, the orderable evidence
(list columns of chunks, documents or images), the fixed context and the item id (default: the row's index).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from omegaconf import DictConfig, ListConfig, OmegaConf

from facet_probe.core.errors import ConfigError, parse_enum
from facet_probe.core.items import (
    AnswerType,
    Component,
    ComponentKind,
    Item,
    choices_problem,
    make_item,
    reading,
)
from facet_probe.datasets.base import DatasetLoader
from facet_probe.datasets.hub import hf_image, letter_index
from facet_probe.datasets.split_table import hub_table, is_local, local_table, split_files

if TYPE_CHECKING:
    import pyarrow as pa


class AnswerForm(StrEnum):
    """How the answer column names the gold option."""

    AUTO = "auto"  # label (when `columns.labels` is mapped), else an integer index, a choice's text or a letter
    INDEX = "index"  # 0-based index into the choices (an integer, or its digits)
    LETTER = "letter"  # A, B, C, ... (also "(B)", " b ")
    TEXT = "text"  # the text of the gold choice
    LABEL = "label"  # one of the labels in `columns.labels` (ARC's "1".."4" or "A".."E", CommonsenseQA's)


@dataclass(frozen=True)
class ColumnMap:
    """Which column (or dotted path into a struct column) holds each part of an item; None: not in this dataset."""

    question: str = "question"
    choices: str | tuple[str, ...] | None = None  # a list column, or one column per option
    answer: str | None = None  # the gold: see AnswerForm (without choices: the free-form answer's text)
    labels: str | None = None  # a list column of the options' labels, for answer_form=label
    aliases: str | None = None  # a list column of other accepted free-form answers
    chunks: str | None = None  # a list column of texts -> text_chunk components (evidence_chunk_order)
    documents: str | None = None  # a list column of texts or {title, text} -> documents (document_rank_order)
    images: str | None = None  # a list column of images -> image components (image_set_order)
    context: str | None = None  # a text shown before the ordered components, never permuted
    context_image: str | None = None  # an image shown before them, never permuted (a figure)
    id: str | None = None  # the item id column (None: the row's index in the split)

    @classmethod
    def from_config(cls, columns: Any, dataset: str) -> ColumnMap:
        """The mapping from a config node, an unknown key refused with one line naming the valid ones."""
        given = OmegaConf.to_container(columns) if isinstance(columns, DictConfig | ListConfig) else columns or {}
        if not isinstance(given, dict):
            raise ConfigError(f"dataset {dataset}: dataset.columns must map keys to columns (dataset.columns.<key>="
                              f"<column>, e.g. dataset.columns.question=prompt); got {columns!r}")
        valid = [f.name for f in fields(cls)]
        if unknown := sorted(set(given) - set(valid)):
            raise ConfigError(f"dataset {dataset}: unknown column key(s) {', '.join(unknown)} in dataset.columns; "
                              f"valid: {', '.join(valid)}")
        if isinstance(given.get("choices"), list):
            given["choices"] = tuple(given["choices"])
        return cls(**{str(key): value for key, value in given.items()})

    def mapped(self) -> dict[str, tuple[str, ...]]:
        """{mapping key: its column references} for every key that is set."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value:
                out[f.name] = value if isinstance(value, tuple) else (value,)
        return out


#: The mapping key that gives components of each kind a facet may order (a facet orders what one of them maps).
KIND_KEYS: dict[str, str] = {ComponentKind.CHOICE: "choices", ComponentKind.TEXT_CHUNK: "chunks",
                             ComponentKind.DOCUMENT: "documents", ComponentKind.IMAGE: "images"}


def value_at(row: dict[str, Any], ref: str) -> Any:
    """The row's value at a column name or a dotted path into struct columns (`choices.text`)."""
    if ref in row:
        return row[ref]
    value: Any = row
    for part in ref.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(ref)
        value = value[part]
    return value


def gold_index(answer: Any, choices: list[str], labels: list[str] | None, form: AnswerForm) -> int | str:
    """The gold option's index, or why the answer names none (a row's skip reason)."""
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return "the answer is empty"
    guess = form is AnswerForm.AUTO
    readings = {f: i for f, i in ((f, read_answer(answer, choices, labels, f, guess)) for f in forms_of(form, labels))
                if i is not None}
    if len(set(readings.values())) > 1:
        return (f"the answer {answer!r} reads as {' and as '.join(readings)} with different options; set "
                "dataset.answer_form")
    if readings:
        return next(iter(readings.values()))
    return f"the answer names no option (read as {' or '.join(forms_of(form, labels))}; dataset.answer_form)"


def forms_of(form: AnswerForm, labels: list[str] | None) -> tuple[AnswerForm, ...]:
    """The readings `form` allows: itself, or for auto the label (labels mapped) else index, text and letter."""
    if form is not AnswerForm.AUTO:
        return (form,)
    return (AnswerForm.LABEL,) if labels is not None else (AnswerForm.INDEX, AnswerForm.TEXT, AnswerForm.LETTER)


def read_answer(answer: Any, choices: list[str], labels: list[str] | None, form: AnswerForm,
                guess: bool = False) -> int | None:
    """The answer read one way (None: it does not read so); when guessing (auto), digits in a text are no index."""
    n = len(choices)
    if form is AnswerForm.INDEX:
        whole = isinstance(answer, int) and not isinstance(answer, bool)
        digits = not guess and isinstance(answer, str) and answer.strip().isdigit()
        index = answer if whole else int(answer) if digits else None
        return index if index is not None and 0 <= index < n else None
    if form is AnswerForm.LETTER:
        return letter_index(answer, n) if isinstance(answer, str) else None
    if form is AnswerForm.TEXT:
        texts = [reading(c) for c in choices]
        return texts.index(reading(str(answer))) if reading(str(answer)) in texts else None
    found = [str(x).strip() for x in labels or []]
    return found.index(str(answer).strip()) if str(answer).strip() in found else None


class HFColumns(DatasetLoader):
    """Rows of a dataset split, mapped to items by dataset.columns."""

    facets: ClassVar[tuple[str, ...]] = ("*",)  # every facet; `facet_problem` checks the mapping against it
    source: ClassVar[str] = "a Hugging Face dataset: a hub id (read through the datasets cache) or local files"
    license: ClassVar[str] = "that of the dataset"

    def __init__(self, name: str = "hf", path: str | None = None, split: str = "test", subset: str | None = None,
                 columns: Any = None, answer_form: AnswerForm | str = AnswerForm.AUTO, **rest) -> None:
        super().__init__(name, path, **rest)
        if not path:
            raise ConfigError(f"dataset {name}: give the data, e.g. dataset={name} dataset.path=<hub id, folder or "
                              "parquet/JSON/CSV file> dataset.columns.question=<column>")
        self.where, self.split, self.subset = str(path), str(split), subset
        self.columns = ColumnMap.from_config(columns, name)
        self.answer_form = parse_enum(AnswerForm, answer_form, f"dataset {name}: answer_form")
        if not self.columns.answer:
            raise ConfigError(f"dataset {name}: set dataset.columns.answer=<column> (the gold option's index, letter, "
                              "label or text; without dataset.columns.choices, the free-form answer)")

    def facet_problem(self, facet: str, kinds: Sequence[str]) -> str | None:
        """The facet orders components that no mapped column gives: one line naming the key to map."""
        keys = list(dict.fromkeys(KIND_KEYS[k] for k in kinds if k in KIND_KEYS))
        if any(getattr(self.columns, key) for key in keys):
            return None
        shown = ", ".join(map(str, kinds))
        if not keys:
            return (f"{facet} orders {shown} components, which dataset={self.name} maps from no column (it maps "
                    "choices, chunks, documents and images); write the items as JSONL instead: dataset=items_jsonl")
        return (f"{facet} orders {shown} components and the column mapping gives none: set "
                + " or ".join(f"dataset.columns.{key}=<column>" for key in keys))

    def table(self) -> pa.Table:
        """The split as read from local files or the datasets cache."""
        if is_local(self.where):
            return local_table(split_files(self.where, self.split, self.subset))
        return hub_table(self.where, self.subset, self.split)

    @property
    def base(self) -> Path:
        """The folder relative image paths are read from (the data's folder; the working folder for a hub id)."""
        here = Path(self.where).expanduser()
        return here if here.is_dir() else here.parent if here.exists() else Path.cwd()

    def load_all(self) -> list[Item]:
        table = self.table()
        self.check_columns(table.column_names)
        self._skipped.clear()
        keep = self.first_of_each_id()
        items = []
        for index, row in enumerate(table.to_pylist()):
            made = self.row_item(row, index)
            if isinstance(made, str):
                self.skip(made)
            elif keep(made.item_id):
                items.append(made)
        if not items:
            raise ConfigError(f"dataset {self.name}: none of the {table.num_rows} rows of {self.where} ({self.split}) "
                              f"makes an item: {self.skipped or 'the split is empty'}; check dataset.columns")
        return items

    def check_columns(self, names: list[str]) -> None:
        """Every mapped column exists (a dotted path: its first part): one line naming the key otherwise."""
        for key, refs in self.columns.mapped().items():
            for ref in refs:
                if ref not in names and ref.split(".")[0] not in names:
                    raise ConfigError(f"dataset {self.name}: dataset.columns.{key}={ref}: no such column in "
                                      f"{self.where} ({self.split}); its columns: {', '.join(names)}")

    def value(self, row: dict[str, Any], key: str) -> Any:
        """The row's value for a mapping key (a list for several choice columns), None when unmapped."""
        ref = getattr(self.columns, key)
        if ref is None:
            return None
        try:
            return [value_at(row, r) for r in ref] if isinstance(ref, tuple) else value_at(row, ref)
        except KeyError as exc:
            raise ConfigError(f"dataset {self.name}: dataset.columns.{key}={ref}: the row has no {exc}") from None

    def row_item(self, row: dict[str, Any], index: int) -> Item | str:
        """One row as an item, or the reason it cannot be one (counted, as every loader counts skipped rows)."""
        raw = self.value(row, "id")
        item_id = f"{self.name}::{index if raw is None else raw}"
        question = self.value(row, "question")
        if question is None or not str(question).strip():
            return "the question is empty"
        parts: dict[str, Any] = {}
        for key, kind in (("chunks", ComponentKind.TEXT_CHUNK), ("documents", ComponentKind.DOCUMENT),
                          ("images", ComponentKind.IMAGE)):
            made = self.components(self.value(row, key), key, kind, item_id)
            if isinstance(made, str):
                return made
            parts[key] = made
        fixed = tuple(self.fixed(row, item_id))
        answer = self.answer_fields(row)
        if isinstance(answer, str):
            return answer
        return make_item(item_id=item_id, dataset=self.name, question=str(question), fixed=fixed,
                         components=(*parts["chunks"], *parts["documents"], *parts["images"]),
                         metadata={"source": self.where, "split": self.split, "row": index}, **answer)

    def answer_fields(self, row: dict[str, Any]) -> dict[str, Any] | str:
        """The item's choices and gold (multiple choice) or its free-form answer, or why the row has none."""
        answer = self.value(row, "answer")
        if self.columns.choices is None:
            if answer is None or not str(answer).strip():
                return "the answer is empty"
            aliases = self.value(row, "aliases") or []
            return {"answer_type": AnswerType.FREE, "gold_answer": str(answer),
                    "answer_aliases": tuple(str(a) for a in aliases if str(a).strip())}
        choices = self.value(row, "choices")
        texts = [str(c) if c is not None else "" for c in choices] if isinstance(choices, list) else []
        if problem := choices_problem(texts):
            return problem
        labels = self.value(row, "labels")
        gold = gold_index(answer, texts, labels, self.answer_form)
        if isinstance(gold, str):
            return gold
        return {"answer_type": AnswerType.MCQ, "choices": tuple(texts), "gold_index": gold}

    def components(self, values: Any, key: str, kind: ComponentKind, item_id: str) -> list[Component] | str:
        """A list column's entries as components of `kind` (ids `<key><i>`), or why they cannot be."""
        if values is None:
            return []
        if not isinstance(values, list):
            return f"{key} is not a list column"
        out = []
        for i, value in enumerate(values):
            cid = f"{key[:-1]}{i}"
            if kind == ComponentKind.IMAGE:
                out.append(Component(id=cid, kind=kind, image=self.image(value, item_id, f"{key}[{i}]")))
                continue
            title, text = (value.get("title"), value.get("text")) if isinstance(value, dict) else (None, value)
            if text is None or not str(text).strip():
                return f"{key}[{i}] has no text"
            out.append(Component(id=cid, kind=kind, text=str(text), title=str(title) if title else None))
        return out

    def fixed(self, row: dict[str, Any], item_id: str) -> list[Component]:
        """The fixed context: a text, then a figure (either may be absent)."""
        out = []
        if (text := self.value(row, "context")) is not None and str(text).strip():
            out.append(Component(id="context", kind=ComponentKind.TEXT_CHUNK, text=str(text)))
        if (image := self.value(row, "context_image")) is not None:
            out.append(Component(id="context_image", kind=ComponentKind.IMAGE,
                                 image=self.image(image, item_id, "context_image")))
        return out

    def image(self, value: Any, item_id: str, what: str):
        """An image as stored (`{bytes, path}`, bytes, or a path relative to the data's folder)."""
        path = value.get("path") if isinstance(value, dict) and not value.get("bytes") else value
        if isinstance(path, str) and not Path(path).is_absolute() and (self.base / path).is_file():
            value = str(self.base / path)
        return hf_image(value, item_id, what)
