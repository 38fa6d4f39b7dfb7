"""The judge protocol: judge cases from trials, the deterministic judge prompt and its cache key, and
parsing the judge's A-D verdicts from its reply."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from facet_probe.items import AnswerType, Item
from facet_probe.prompts import AnswerFormat, Message, Prompt, TextPart
from facet_probe.trial_io import iter_records

VERDICTS = {"A": "equivalent", "B": "partial", "C": "flip", "D": "unparsable"}


class JudgeParseError(ValueError):
    """The judge's reply does not contain a verdict for every answer."""


@dataclass(frozen=True)
class JudgeItem:
    """What the judge needs of an item: the question and the short gold answer."""

    item_id: str
    question: str
    gold: str
    answer_type: str

    @classmethod
    def of(cls, item: Item | JudgeItem | Mapping[str, Any]) -> JudgeItem:
        """From an `Item`, a `JudgeItem`, or an items.jsonl record (read without loading its images)."""
        if isinstance(item, JudgeItem):
            return item
        if isinstance(item, Item):
            return cls(item.item_id, item.question, item.gold, str(item.answer_type))
        answer_type = str(item.get("answer_type", AnswerType.MCQ))
        gold = item.get("gold_answer")
        if gold is None and item.get("choices") and item.get("gold_index") is not None:
            gold = item["choices"][item["gold_index"]]
        return cls(str(item["item_id"]), str(item["question"]), str(gold or ""), answer_type)


@dataclass(frozen=True)
class JudgeCase:
    """One judge call: a model's K answers to one item, in ordering order (the first is the reference)."""

    model: str
    item: JudgeItem
    trial_keys: tuple[str, ...]
    ordering_idx: tuple[int, ...]
    repeat_idx: tuple[int, ...]
    answers: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    answer: int  # 1-based position in the case (1 is the reference)
    verdict: str | None  # A-D; None for the reference
    reason: str = ""
    gold_match: bool | None = None


# -- building cases and prompts (pure) ---------------------------------------------------------------
def load_items(path: str | Path) -> dict[str, JudgeItem]:
    """`items.jsonl` of a run folder as JudgeItems by id."""
    return {rec["item_id"]: JudgeItem.of(rec) for rec in iter_records(Path(path))}


def _answer_text(row: Mapping[str, Any], max_chars: int) -> str:
    """The parsed answer when parsing worked, else the raw output (its last `max_chars` characters)."""
    parsed = row.get("answer_raw")
    if row.get("parse_status") in ("ok", "fallback") and isinstance(parsed, str) and parsed.strip():
        text = parsed
    else:
        raw = row.get("raw_output")
        text = "" if raw is None or pd.isna(raw) else str(raw)
    text = text.strip()
    return text if len(text) <= max_chars else "..." + text[-max_chars:]


def build_cases(
    trials: pd.DataFrame, items: Mapping[str, JudgeItem], max_answer_chars: int = 2000
) -> list[JudgeCase]:
    """Group the free-form trials by (model, item); items not in `items` or not free-form are skipped."""
    needed = {"model", "item_id", "trial_key", "ordering_idx", "raw_output"}
    missing = needed - set(trials.columns)
    if missing:
        raise ValueError(f"trials lack columns {sorted(missing)}")
    frame = trials.copy()
    if "repeat_idx" not in frame:
        frame["repeat_idx"] = 0
    if "error" in frame:
        frame = frame[frame["error"].isna()]
    cases = []
    for (model, item_id), group in frame.groupby(["model", "item_id"], sort=True):
        item = items.get(item_id)
        if item is None or item.answer_type != AnswerType.FREE:
            continue
        group = group.sort_values(["ordering_idx", "repeat_idx", "trial_key"])
        rows = group.to_dict("records")
        cases.append(
            JudgeCase(
                model=str(model),
                item=item,
                trial_keys=tuple(str(r["trial_key"]) for r in rows),
                ordering_idx=tuple(int(r["ordering_idx"]) for r in rows),
                repeat_idx=tuple(int(r["repeat_idx"]) for r in rows),
                answers=tuple(_answer_text(r, max_answer_chars) for r in rows),
            )
        )
    return cases


JUDGE_SYSTEM = (
    "You are a careful grader. The same question was asked several times with the same evidence presented "
    "in different orders. Judge whether the MEANING of each answer matches answer 1 (the reference). "
    "Ignore wording, formatting, length and reasoning style; judge only the final answer.\n"
    "Verdicts: A = equivalent (same answer); B = partial (overlaps the reference but adds, drops or changes "
    "part of it); C = flip (a different or contradictory answer); D = unparsable (no answer can be read from "
    "it, or the reference itself has none)."
)


def judge_prompt(case: JudgeCase, gold_anchored: bool) -> Prompt:
    """The judge's prompt for one case (deterministic, so its hash keys the cache)."""
    lines = [f"Question: {case.item.question}", ""]
    if gold_anchored:
        lines += [f"Gold answer: {case.item.gold}", ""]
    for i, answer in enumerate(case.answers, 1):
        tag = " (reference)" if i == 1 else ""
        lines.append(f"Answer {i}{tag}:\n{answer or '(empty)'}\n")
    n = len(case.answers)
    schema = '{"verdicts": [{"answer": 2, "verdict": "A", "reason": "<at most 15 words>"}'
    gold = ""
    if gold_anchored:
        schema += ', "gold": [{"answer": 1, "matches_gold": true}]'
        gold = f' and, in "gold", whether each of answers 1..{n} matches the gold answer'
    lines.append(f"Give a verdict for each of answers 2..{n}{gold}. Reply with JSON only:\n{schema}}}")
    return Prompt(
        system=JUDGE_SYSTEM,
        messages=(Message("user", (TextPart("\n".join(lines)),)),),
        answer_format=AnswerFormat.FREE,
    )


def judgment_key(judge_fingerprint: str, prompt: Prompt) -> str:
    """Content address of one judgment: same judge settings + same prompt = same judgment."""
    return hashlib.sha256(f"{judge_fingerprint}\x1f{prompt.hash}".encode()).hexdigest()[:24]


# -- parsing the judge's reply (pure) ----------------------------------------------------------------
def _json_object(text: str) -> dict[str, Any] | None:
    cleaned = re.sub(r"```(?:json)?", "", text)
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(cleaned[start : end + 1])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


_LINE = re.compile(r"^\W*answer\s*#?\s*(\d+)\W+\(?([ABCD])\)?(?:\W+(.*))?$", re.I | re.M)


def parse_verdicts(text: str, n_answers: int, gold_anchored: bool = False) -> list[Verdict]:
    """Verdicts for answers 1..n (1 is the reference) from the judge's JSON, or from lines like
    "Answer 2: B - reason"; raise `JudgeParseError` when any of answers 2..n lacks a verdict."""
    found: dict[int, tuple[str, str]] = {}
    gold: dict[int, bool] = {}
    obj = _json_object(text)
    if obj is not None:
        for entry in obj.get("verdicts") or []:
            try:
                idx, verdict = int(entry["answer"]), str(entry["verdict"]).strip().upper()[:1]
            except (KeyError, TypeError, ValueError):
                continue
            if verdict in VERDICTS:
                found[idx] = (verdict, str(entry.get("reason", "")).strip())
        for entry in obj.get("gold") or []:
            try:
                gold[int(entry["answer"])] = bool(entry["matches_gold"])
            except (KeyError, TypeError, ValueError):
                continue
    if not found:
        for match in _LINE.finditer(text):
            found.setdefault(int(match.group(1)), (match.group(2).upper(), (match.group(3) or "").strip()))
    missing = [i for i in range(2, n_answers + 1) if i not in found]
    if missing:
        raise JudgeParseError(f"no verdict for answers {missing} in the judge's reply: {text[:200]!r}")
    out = [Verdict(1, None, "reference", gold.get(1) if gold_anchored else None)]
    out += [
        Verdict(i, found[i][0], found[i][1][:300], gold.get(i) if gold_anchored else None)
        for i in range(2, n_answers + 1)
    ]
    return out
