"""The rehearsal's stand-in providers: what the loopback fake server answers, as models and as judges.

Every API "model" of the rehearsal is a student that knows the items (it reads the run's own items files) and
answers like a real, imperfect model: right with its own skill, else anchored on the first thing it was shown
or on a seeded draw, so its answers change with the ordering; free-text answers are sometimes paraphrased, so
exact match and the judge disagree. The judges read the answers they are shown and decide as a careful reader
would (one normalises paraphrases, the other is stricter), so they disagree now and then. Every reply is a
pure function of the request, so a resumed or repeated call gets the same answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from facet_probe.scoring.parsing import normalize_free
from facet_probe_dev.testing.fake_providers import RecordedCall, sent_thinking_budget

_OPTION = re.compile(r"^([A-Z])\. (.*)$", re.M)
_QUESTION = re.compile(r"^(?:QUESTION|Question): (.*)$", re.M)
_JUDGE_ANSWER = re.compile(r"^ANSWER (\d+): (.*)$", re.M)
_GOLD = re.compile(r"^GOLD ANSWER: (.*)$", re.M)


def draw(*parts: object) -> float:
    """A uniform number in [0, 1) fixed by its arguments (the students' and judges' only randomness)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Student:
    """One stand-in model: `skill` is its chance of the right answer on a given prompt, `anchoring` its chance
    of taking the first option (or first passage's entity) otherwise, `paraphrase` its chance of wording a right
    free-text answer its own way."""

    model_id: str
    skill: float
    anchoring: float
    paraphrase: float = 0.0


@dataclass(frozen=True)
class KnownItem:
    question: str
    gold: str
    choices: tuple[str, ...]
    distractors: tuple[str, ...]  # free-text items: the other entities their passages name
    texts: tuple[str, ...] = ()  # the text of its components (which of several items asking one question it is)


def known_items(files: Iterable[Path]) -> dict[str, list[KnownItem]]:
    """Question -> the items asking it, from run folders' items.jsonl files."""
    out: dict[str, list[KnownItem]] = {}
    seen: set[str] = set()
    for path in files:
        for line in Path(path).read_text().splitlines():
            rec = json.loads(line) if line.strip() else None
            if not rec or rec["item_id"] in seen:
                continue
            seen.add(rec["item_id"])
            choices = tuple(rec.get("choices") or ())
            gold = choices[rec["gold_index"]] if rec.get("gold_index") is not None else str(rec.get("gold_answer"))
            others = tuple(str((c.get("metadata") or {}).get("answer")) for c in rec.get("components") or ()
                           if (c.get("metadata") or {}).get("answer") not in (None, gold))
            texts = tuple(str(c["text"]) for c in rec.get("components") or () if c.get("text"))
            out.setdefault(rec["question"], []).append(KnownItem(rec["question"], gold, choices, others, texts))
    return out


class Classroom:
    """The fake server's `reply`: students answer audit prompts, judges answer judge and mechanism prompts.

    The students know the items of every run folder under `root` (read again when a question is new to them,
    since each audit writes its items before its first call)."""

    def __init__(self, students: Iterable[Student], root: Path) -> None:
        self.students = {s.model_id: s for s in students}
        self.root = root
        self.items: dict[str, list[KnownItem]] = {}
        self._lock = threading.Lock()

    def __call__(self, call: RecordedCall) -> str:
        text = "\n".join(call.texts())
        if text.startswith("A multimodal model was asked"):
            return set_verdict(text, strict=call.provider.startswith("openai"))
        if '"label"' in text and "Question:" in text:
            return mechanism_label(text, call.provider)
        student = self.students.get(call.model)
        if student is None:
            return "Answer: A"  # a model the rehearsal did not enrol: a fixed, parseable answer
        if sent_thinking_budget(call.body) == 1024:  # a short thinking budget: anchored on the first option more often
            student = replace(student, skill=student.skill / 2, anchoring=0.9)
        seen = "\n".join([text, *call.image_digests()])  # images in the order shown move the answer too
        return answer(student, text, self._known(text), seen)

    def _known(self, prompt: str) -> dict[str, list[KnownItem]]:
        question = _QUESTION.search(prompt)
        with self._lock:
            if question and question.group(1).strip() not in self.items:
                self.items = known_items(sorted(self.root.rglob("items.jsonl")))
            return self.items


def answer(student: Student, prompt: str, items: dict[str, list[KnownItem]], seen: str | None = None) -> str:
    """The student's reply to an audit prompt (letters for options, a short phrase otherwise); its draws are
    fixed by what it was shown (`seen`: the prompt's text and its images in order, default the text)."""
    question = _QUESTION.search(prompt)
    candidates = items.get(question.group(1).strip(), []) if question else []
    options = _OPTION.findall(prompt)
    seen = prompt if seen is None else seen
    u, v = draw(student.model_id, seen), draw(student.model_id, "second", seen)
    if options:
        shown = [text for _, text in options]
        item = next((i for i in candidates if set(i.choices) == set(shown)), None)
        right = shown.index(item.gold) if item is not None and item.gold in shown else None
        if right is not None and u < student.skill:
            pick = right
        elif v < student.anchoring:
            pick = 0
        else:
            pick = int(draw(student.model_id, "pick", seen) * len(shown))
        return f"Answer: {options[pick][0]}"
    shown_here = [i for i in candidates if i.texts and all(t in prompt for t in i.texts)]
    item = next(iter(shown_here), None) or next((i for i in candidates if i.gold.lower() in prompt.lower()),
                                                candidates[0] if candidates else None)
    if item is None:
        return "Answer: unknown"
    if u < student.skill:
        said = item.gold if draw(student.model_id, "paraphrase", seen) >= student.paraphrase \
            else f"{item.gold}, according to what I was shown"
        return f"Answer: {said}"
    named = [d for d in item.distractors if d.lower() in prompt.lower()] or list(item.distractors) or [item.gold]
    first = min(named, key=lambda d: prompt.lower().find(d.lower()) % 10**9)
    pick = first if v < student.anchoring else named[int(draw(student.model_id, "pick", seen) * len(named))]
    return f"Answer: {pick}"


def set_verdict(prompt: str, strict: bool) -> str:
    """A judge's set verdict in FACET-PROBE's format (and the gold line when asked): A when every answer names
    the same thing, B when most do, C otherwise; the strict judge does not forgive a paraphrase."""
    answers = [a.strip() for _, a in _JUDGE_ANSWER.findall(prompt)]
    gold = _GOLD.search(prompt)
    key = (lambda a: normalize_free(a)) if strict else core
    kinds = [key(a) for a in answers]
    top = max(kinds.count(k) for k in kinds) if kinds else 0
    verdict = "A" if top == len(kinds) else ("B" if top * 2 > len(kinds) else "C")
    lines = [f"Verdict: {verdict}", "Reason: compared what each answer names"]
    if gold:
        lines.append("Gold: " + ", ".join(f"{i}={'yes' if core(a) == core(gold.group(1)) else 'no'}"
                                          for i, a in enumerate(answers, 1)))
    return "\n".join(lines)


def core(answer_text: str) -> str:
    """What a free-text answer names: normalised, and a trailing ', according to ...' aside dropped."""
    return normalize_free(answer_text.split(",")[0])


def mechanism_label(prompt: str, provider: str) -> str:
    """A mechanism judge's label: positional anchoring when the flipped answers include the first option shown,
    else reasoning instability; each provider's judge calls a share of them 'other' (so the judges disagree)."""
    label = "P" if "Final answer: A" in prompt else "R"
    if draw(provider, prompt) < 0.2:
        label = "O"
    return json.dumps({"label": label, "reason": "from the answers under each ordering"})
