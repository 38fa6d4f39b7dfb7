"""The explorer's data: trials, items, item metrics and judge verdicts -> one JSON-safe blob for the page.

Per item (facet, item id) and model: its flip status (the report's item metrics), and every trial in
ordering then repeat order with its reply, the parsed answer as displayed and as meant (the option's text),
correctness, and the judge's verdicts. Prompts are kept once per stored hash (`seen.Seen`), images once.
A FACET-PROBE v0.0.1 trial file has no prompt mode, parsed letter or repeat: its trials show what it holds
(reply, parsed answer, correctness, flip status) with the prompt marked not recoverable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from facet_probe.core.items import Item
from facet_probe.core.trials import PARSE_ERROR
from facet_probe.facets.prompts import OPTION_LETTERS
from facet_probe.report.explorer.seen import DIFFERS, UNAVAILABLE, Seen

#: The item statuses the page filters on (per item and model).
FLIPPED, STABLE, NO_PAIR = "flipped", "stable", "no pair"


class _Row(NamedTuple):
    """A trial as the page shows it: its columns; any but the trial's identity may be absent (v0.0.1 files: None
    there)."""

    model: str
    facet: str
    dataset: str
    item_id: str
    ordering_idx: Any
    repeat_idx: Any
    permutation: Any
    prompt_hash: Any
    mode: Any
    instruction: Any
    raw_output: Any
    thinking: Any
    answer_raw: Any
    answer_normalized: Any
    correct: Any
    score_kind: Any
    parse_status: Any
    error: Any
    trial_key: Any


#: The trial columns the page shows.
COLUMNS = _Row._fields
#: FACET-PROBE v0.0.1's MCQ score kind: the answer is the chosen option's source index ("2": the third option).
CONTENT_INDEX = "option_content_idx"


def item_key(facet: str, item_id: str) -> str:
    """An item's address in the page (`explorer.html#item=<key>`): its facet and id."""
    return f"{facet}/{item_id}"


def meaning(item: Item | None, normalized: Any, score_kind: str | None = None) -> str | None:
    """What a parsed answer means: an MCQ answer's option text (answers are source-order letters, or source
    indices under v0.0.1's `option_content_idx`), else the normalised answer itself; None for a parse error."""
    if normalized is None or (isinstance(normalized, float) and math.isnan(normalized)) or normalized == PARSE_ERROR:
        return None
    text = str(normalized)
    if score_kind == CONTENT_INDEX and text.isdigit() and int(text) < len(OPTION_LETTERS):
        text = OPTION_LETTERS[int(text)]
    if item is not None and item.choices and len(text) == 1 and text.isalpha():
        idx = ord(text.upper()) - ord("A")
        if 0 <= idx < len(item.choices):
            return item.choices[idx]
    return text


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and pandas NA as None, numpy scalars as Python ones."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") and not isinstance(value, str | bytes) else value


def _values(column: pd.Series) -> list:
    """A column as JSON-safe Python values, whole (a value at a time through `_clean` is 10x slower at 400k);
    numpy scalars an object column holds become Python ones (JSON would spell them as strings)."""
    values = column.to_numpy(dtype=object, na_value=None).tolist()
    if column.dtype == object:
        values = [v.item() if isinstance(v, np.generic) else v for v in values]
    return values


def judge_verdicts(path: Path) -> dict[str, list[dict]]:
    """trial_key -> the judges' verdicts on that trial (judgments.csv of a judged run), else {}."""
    if not path.is_file():
        return {}
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    if frame.empty or "trial_key" not in frame:
        return {}
    out: dict[str, list[dict]] = {}
    cols = [c for c in ("judge", "verdict", "verdict_label", "reason", "set_verdict", "set_reason", "gold_match",
                        "is_reference") if c in frame]
    for row in frame[["trial_key", *cols]].itertuples(index=False):
        out.setdefault(row.trial_key, []).append({c: _clean(getattr(row, c)) for c in cols})
    return out


@dataclass
class Blob:
    """The page's data, built run by run (`add_run`) and read once (`to_json`)."""

    page_dir: Path
    title: str
    seen: Seen = field(init=False)
    runs: list[dict] = field(default_factory=list)
    items: dict[str, dict] = field(default_factory=dict)  # by `item_key`
    attack: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seen = Seen(self.page_dir)

    def add_run(self, name: str, trials: pd.DataFrame, items: dict[tuple[str, str], dict], item_metrics: pd.DataFrame,
                verdicts: dict[str, list[dict]], provenance: dict | None = None,
                model_label: dict[str, str] | None = None) -> None:
        """One audit run's trials (already scored, one run's settings) into the page."""
        self.runs.append({"name": name, "kind": "audit", "provenance": provenance or {}})
        label = model_label or {}
        status = _statuses(item_metrics)
        t = trials[[c for c in COLUMNS if c in trials]]
        t = t.sort_values(["model", "facet", "item_id", "ordering_idx", "repeat_idx"], kind="stable")
        absent = [None] * len(t)
        for row in map(_Row._make, zip(*(_values(t[c]) if c in t else absent for c in COLUMNS), strict=True)):
            item = self.seen.item(row.dataset, row.item_id, items)
            key = item_key(row.facet, row.item_id)
            entry = self.items.get(key) or self.items.setdefault(key, self._item_entry(key, row, item))
            model = label.get(row.model, row.model)
            cell = entry["models"].get(model)
            if cell is None:
                st = status.get((row.model, row.facet, row.dataset, row.item_id), {})
                cell = entry["models"][model] = {"run": name, **st, "trials": []}
            cell["trials"].append(self._trial(row, item, verdicts))

    def _trial(self, row: _Row, item: Item | None, verdicts: dict[str, list[dict]]) -> dict:
        """One trial as the page shows it (`row`: JSON-safe values, None where the column is absent)."""
        perm = row.permutation
        permutation = [int(x) for x in perm] if pd.api.types.is_list_like(perm) else []
        stored_hash = row.prompt_hash
        how = self.seen.add(stored_hash, row.facet, item, permutation, row.mode, row.instruction) \
            if stored_hash else UNAVAILABLE
        return {"o": int(row.ordering_idx), "r": int(row.repeat_idx or 0), "p": permutation, "h": stored_hash,
                "seen": how, "out": row.raw_output, "think": row.thinking, "a": row.answer_raw,
                "n": row.answer_normalized, "mean": meaning(item, row.answer_normalized, row.score_kind),
                "c": row.correct, "ps": row.parse_status, "err": row.error, "j": verdicts.get(row.trial_key, [])}

    def _item_entry(self, key: str, row, item: Item | None) -> dict:
        gold = None
        if item is not None:
            gold = item.choices[item.gold_index] if item.choices and item.gold_index is not None else item.gold_answer
        return {"key": key, "id": row.item_id, "ds": row.dataset, "f": row.facet,
                "q": item.question if item is not None else "", "choices": list(item.choices) if item else [],
                "gold": gold, "models": {}}

    def add_attack(self, name: str, rows: list[dict], provenance: dict | None = None) -> None:
        """An attack run's samples (see `explore.attack`)."""
        self.runs.append({"name": name, "kind": "attack", "provenance": provenance or {}})
        self.attack.extend({"run": name, **row} for row in rows)

    def to_json(self) -> dict:
        prompts = self.seen.prompts
        differs = sum(p["recovered"] == DIFFERS for p in prompts.values())
        unavailable = sum(p["recovered"] == UNAVAILABLE for p in prompts.values())
        return {"title": self.title, "runs": self.runs, "items": list(self.items.values()), "prompts": prompts,
                "systems": self.seen.systems, "images": self.seen.images, "attack": self.attack,
                "recovery": {"prompts": len(prompts), "differs": differs, "unavailable": unavailable}}


def _statuses(item_metrics: pd.DataFrame) -> dict[tuple, dict]:
    """(model, facet, dataset, item_id) -> flip status, parse error, accuracy, modal answer (the report's)."""
    if item_metrics is None or item_metrics.empty:
        return {}
    m = item_metrics
    out = {}
    cols = ("model", "facet", "dataset", "item_id", "any_flip", "parse_rate", "accuracy")
    for model, facet, dataset, item_id, flip, parse_rate, accuracy in zip(*(_values(m[c]) for c in cols), strict=True):
        out[(model, facet, dataset, item_id)] = {
            "st": NO_PAIR if flip is None else (FLIPPED if flip else STABLE),
            "pe": bool(parse_rate is not None and parse_rate < 1), "acc": accuracy}
    return out
