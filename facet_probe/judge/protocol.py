"""The judge protocol: judge cases from trials, the deterministic judge prompt and its cache keys, and
parsing the judge's A-D verdicts from its reply, in either protocol (`JudgeProtocol`)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from operator import itemgetter
from pathlib import Path
from typing import Any

import pandas as pd

from facet_probe.core.items import AnswerType, Item
from facet_probe.core.prompts import AnswerFormat, Message, Prompt, TextPart
from facet_probe.store.run_folder import ItemKey, read_items

VERDICTS = {"A": "equivalent", "B": "partial", "C": "flip", "D": "unparsable"}


class JudgeProtocol(StrEnum):
    """What the judge is asked about a case's K answers."""

    REFERENCE = "reference"  # FACET-PROBE v0.0.1: ONE verdict A-D for the whole set of answers
    PER_ANSWER = "per_answer"  # a verdict A-D for each answer against answer 1 (the reference answer)


class UnreadableReply(StrEnum):
    """What a judge reply with no readable verdict becomes."""

    RETRY = "retry"  # ours: stored as an error, left out of the sem-flip mean (NaN) and asked again next run
    COUNT = "count"  # FACET-PROBE v0.0.1: verdict "?", kept, counted in n (not a flip)


#: The set verdict of an unreadable reply under `UnreadableReply.COUNT` (the reference's label).
UNREADABLE = "?"


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
    """One case: a model's K answers to one item in one facet and repeat, in ordering order (the first is
    the reference). Cases whose prompts read the same share one judge call; each keeps its own verdicts."""

    model: str
    item: JudgeItem
    trial_keys: tuple[str, ...]
    ordering_idx: tuple[int, ...]
    repeat_idx: tuple[int, ...]
    answers: tuple[str, ...]
    facet: str = ""
    dataset: str = ""
    cut: tuple[bool, ...] = ()  # per answer: sent cut to its last `max_answer_chars` characters

    @property
    def identity(self) -> dict[str, Any]:
        """(model, facet, dataset, item_id, repeat): what a verdict is credited to."""
        return {"model": self.model, "facet": self.facet, "dataset": self.dataset,
                "item_id": self.item.item_id, "repeat_idx": self.repeat_idx[0] if self.repeat_idx else 0}


@dataclass(frozen=True)
class Verdict:
    answer: int  # 1-based position in the case (1 is the reference)
    verdict: str | None  # A-D; None for the reference
    reason: str = ""
    gold_match: bool | None = None


# -- building cases and prompts (pure) ---------------------------------------------------------------
def load_items(path: str | Path) -> dict[str, JudgeItem]:
    """`items.jsonl` of a run folder as JudgeItems by id ({} without one; a damaged line is one error naming it)."""
    return judge_items(read_items([Path(path)]))


def judge_items(records: Mapping[ItemKey, dict]) -> dict[str, JudgeItem]:
    """A run's item records (`store.run_folder.RunFolder.items`) as JudgeItems by id."""
    return {rec["item_id"]: JudgeItem.of(rec) for rec in records.values()}


def _answer_text(row: Mapping[str, Any], max_chars: int | None, protocol: JudgeProtocol) -> str:
    """Per answer: the parsed answer when parsing worked, else the raw output; reference: the raw output
    (as FACET-PROBE v0.0.1 sends it). Cut to its last `max_chars` characters (None: never cut, as the
    reference; `is_cut` says whether it was)."""
    parsed = row.get("answer_raw")
    if (protocol == JudgeProtocol.PER_ANSWER and row.get("parse_status") in ("ok", "fallback")
            and isinstance(parsed, str) and parsed.strip()):
        text = parsed
    else:
        raw = row.get("raw_output")
        text = "" if raw is None or pd.isna(raw) else str(raw)
    text = text.strip()
    return "..." + text[-max_chars:] if max_chars is not None and is_cut(text, max_chars) else text


def is_cut(text: str, max_chars: int | None) -> bool:
    """Is an answer of this (stripped) text cut before it is sent to the judge?"""
    return max_chars is not None and len(text) > max_chars


CASE_KEYS = ["model", "facet", "dataset", "item_id", "repeat_idx"]


def build_cases(
    trials: pd.DataFrame, items: Mapping[str, JudgeItem], max_answer_chars: int | None = 2000,
    protocol: JudgeProtocol | str = JudgeProtocol.PER_ANSWER,
) -> list[JudgeCase]:
    """Group the free-form trials into cases by (model, facet, dataset, item, repeat); items not in `items`
    or not free-form are skipped."""
    needed = {"model", "item_id", "trial_key", "ordering_idx", "raw_output"}
    missing = needed - set(trials.columns)
    if missing:
        raise ValueError(f"trials lack columns {sorted(missing)}")
    protocol = JudgeProtocol(protocol)
    frame = trials.copy()
    for col, default in (("repeat_idx", 0), ("facet", ""), ("dataset", "")):
        if col not in frame:
            frame[col] = default
    frame[["facet", "dataset"]] = frame[["facet", "dataset"]].fillna("").astype(str)
    if "error" in frame:
        frame = frame[frame["error"].isna()]
    free = [item_id for item_id, item in items.items() if item.answer_type == AnswerType.FREE]
    frame = frame[frame["item_id"].isin(free)].dropna(subset=CASE_KEYS)
    # one sort and one conversion for the whole frame: a case per run of equal keys (per-group pandas calls
    # took 5 ms a case, minutes for a paper-size panel)
    ordered = frame.sort_values([*CASE_KEYS, "ordering_idx", "trial_key"], kind="stable").to_dict("records")
    cases = []
    for (model, facet, dataset, item_id, _), group in itertools.groupby(ordered, key=itemgetter(*CASE_KEYS)):
        rows = list(group)
        cases.append(
            JudgeCase(
                model=str(model),
                item=items[item_id],
                trial_keys=tuple(str(r["trial_key"]) for r in rows),
                ordering_idx=tuple(int(r["ordering_idx"]) for r in rows),
                repeat_idx=tuple(int(r["repeat_idx"]) for r in rows),
                answers=tuple(_answer_text(r, max_answer_chars, protocol) for r in rows),
                facet=str(facet),
                dataset=str(dataset),
                cut=tuple(is_cut(_answer_text(r, None, protocol), max_answer_chars) for r in rows),
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


REFERENCE_SYSTEM = (
    "You are a careful evaluator comparing multiple answers to the same multimodal question. Multiple "
    "answers were produced by the same model across different orderings of the same evidence. Your job: "
    "judge whether the answers are semantically equivalent, meaning same content possibly paraphrased, or "
    "whether they reflect a content flip with different facts, different conclusions, or different referents."
)

REFERENCE_TEMPLATE = """A multimodal model was asked the same question {k} times.
Each time, the underlying evidence was the same but was presented in a different order.
The model produced these {k} answers:

QUESTION: {question}

{answers}

Decide ONE label that best characterizes the set of answers:

A. EQUIVALENT - all {k} answers say the same thing. Paraphrased wording is fine
if the facts, conclusion, and referents are the same.
B. PARTIAL - some answers agree with each other but at least one differs in content,
not just wording.
C. FLIP - the answers reflect substantially different content across orderings,
such as different facts, conclusions, or referents.
D. UNPARSABLE - at least one answer is too short, malformed, or off-task to judge equivalence.

Respond strictly in this format:
Verdict: <A|B|C|D>
Reason: <one short sentence, <=30 words>
"""


def judge_prompt(
    case: JudgeCase, gold_anchored: bool, protocol: JudgeProtocol | str = JudgeProtocol.PER_ANSWER
) -> Prompt:
    """The judge's prompt for one case in the given protocol (deterministic, so its hash keys the cache)."""
    if JudgeProtocol(protocol) == JudgeProtocol.REFERENCE:
        return _reference_prompt(case, gold_anchored)
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


def _reference_prompt(case: JudgeCase, gold_anchored: bool) -> Prompt:
    """FACET-PROBE v0.0.1's set-level prompt; `gold_anchored` adds the gold and a per-answer gold line."""
    answers = "\n".join(f"ANSWER {i}: {a}" for i, a in enumerate(case.answers, 1))
    text = REFERENCE_TEMPLATE.format(k=len(case.answers), question=case.item.question, answers=answers)
    if gold_anchored:
        n = len(case.answers)
        text += (f"\nGOLD ANSWER: {case.item.gold}\nAlso say, on one more line, whether each answer matches "
                 f"the gold answer:\nGold: " + ", ".join(f"{i}=<yes|no>" for i in range(1, n + 1)) + "\n")
    return Prompt(
        system=REFERENCE_SYSTEM,
        messages=(Message("user", (TextPart(text),)),),
        answer_format=AnswerFormat.FREE,
    )


def call_key(judge_fingerprint: str, prompt: Prompt) -> str:
    """Content address of one judge call: same judge settings + same prompt = same reply. This was the
    judgment key before cases had their own records, so an older cache's keys are call keys."""
    return hashlib.sha256(f"{judge_fingerprint}\x1f{prompt.hash}".encode()).hexdigest()[:24]


legacy_judgment_key = call_key


def judgment_key(judge_fingerprint: str, prompt: Prompt, case: JudgeCase | None = None) -> str:
    """Key of one case's judgment: the call key plus the case's identity (without a case: the call key)."""
    base = call_key(judge_fingerprint, prompt)
    return base if case is None else case_key(base, case)


def case_key(call: str, case: JudgeCase) -> str:
    """A case's judgment key from its call key."""
    ident = json.dumps(case.identity, sort_keys=True)
    return hashlib.sha256(f"{call}\x1f{ident}".encode()).hexdigest()[:24]


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


_SET_VERDICT = re.compile(r"^\W*verdict\W*\(?([ABCD])\b", re.I | re.M)
_SET_REASON = re.compile(r"^\W*reason\W*(.*)$", re.I | re.M)
_GOLD_LINE = re.compile(r"^\W*gold\s*:(.*)$", re.I | re.M)
_GOLD_PAIR = re.compile(r"(\d+)\s*[=:]\s*(yes|no|true|false)", re.I)


def parse_set_verdict(text: str, n_answers: int, gold_anchored: bool = False) -> tuple[Verdict, list[Verdict]]:
    """The set-level verdict (answer 0) from "Verdict: <A-D>" / "Reason: ..." lines, and per answer 1..n the
    gold match when asked; raise `JudgeParseError` when no verdict can be read (the reference says "?")."""
    found = _SET_VERDICT.search(text or "")
    if found is None:
        raise JudgeParseError(f"no 'Verdict: <A-D>' line in the judge's reply: {(text or '')[:200]!r}")
    reason = _SET_REASON.search(text)
    gold: dict[int, bool] = {}
    line = _GOLD_LINE.search(text) if gold_anchored else None
    if line is not None:
        gold = {int(i): v.lower() in ("yes", "true") for i, v in _GOLD_PAIR.findall(line.group(1))}
    answers = [Verdict(i, None, "", gold.get(i)) for i in range(1, n_answers + 1)]
    return Verdict(0, found.group(1).upper(), (reason.group(1).strip() if reason else "")[:300]), answers


def set_verdict_of(verdicts: list[str | None]) -> str | None:
    """A set-level verdict from per-answer ones: D if any answer is unparsable, else C if any flips, else B if
    any is partial, else A (None when there are none)."""
    seen = {v for v in verdicts if v}
    for label in ("D", "C", "B", "A"):
        if label in seen:
            return label
    return None
