"""An LLM judge of rationale changes (Table 2's judge column, Figure 7's judge labels), cached and resumable.

One call per attacked sample with CoT: the question, its options, the answers with the clean and the
adversarial image and the two rationales; the judge replies ``{"changed": true|false, "change":
"key"|"trivial"|"none"}``. Any judge config works (`judge=<name>`, an `LLMJudge`: its runner is used).
Judgments go to `rationale_judgments.jsonl` in the budget folder (append-only, fsync'd, keyed by the
judge's fingerprint and the exact prompt), so re-running calls only what is missing; a failed or
unreadable call is stored as an error and retried next time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

from facet_probe.attack.rationale_change import Change
from facet_probe.core.prompts import AnswerFormat, Message, Prompt, TextPart
from facet_probe.core.trials import fingerprint_hash
from facet_probe.runners.base import Request
from facet_probe.store.jsonl import append_record, iter_records, repair_torn_tail

log = logging.getLogger("facet_probe.attack")

JUDGMENTS = "rationale_judgments.jsonl"
SYSTEM = ("You compare two rationales a vision-language model wrote for the same multiple-choice question: one "
          "for the original image, one for a slightly perturbed image. Judge the meaning, not the wording.")
_CHANGE = {"key": Change.KEY, "trivial": Change.TRIVIAL, "none": Change.NO_CHANGE}


def judge_prompt(row: dict) -> Prompt:
    """The deterministic prompt for one attacked row (its hash keys the cache)."""
    options = " ".join(f"({lab}) {opt}" for lab, opt in zip(row.get("labels") or [], row.get("options") or [],
                                                             strict=False))
    text = "\n".join([
        f"Question: {row.get('question') or '(not recorded)'}", f"Options: {options or '(not recorded)'}",
        f"Answer with the original image: ({row.get('clean_answer')})",
        f"Answer with the perturbed image: ({row.get('adv_answer')})", "",
        f"Rationale 1 (original image):\n{row.get('clean_rationale') or '(empty)'}", "",
        f"Rationale 2 (perturbed image):\n{row.get('adv_rationale') or '(empty)'}", "",
        'Did the rationale change in meaning ("changed")? If it did, did words crucial to the answer change '
        '("key") or only details that do not bear on the answer ("trivial")? Reply with JSON only: '
        '{"changed": true, "change": "key"} with change one of key, trivial, none.'])
    return Prompt(system=SYSTEM, messages=(Message("user", (TextPart(text),)),), answer_format=AnswerFormat.FREE)


def parse_judgment(text: str) -> tuple[bool, Change]:
    """(changed, change) from the judge's reply; ValueError when it has neither."""
    m = re.search(r"\{.*\}", text, re.S)
    try:
        data = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or str(data.get("change", "")).lower() not in _CHANGE:
        raise ValueError(f"no judgment in the reply {text[:200]!r}")
    change = _CHANGE[str(data["change"]).lower()]
    flag = data.get("changed")
    is_changed = change != Change.NO_CHANGE if not isinstance(flag, bool) else flag
    return is_changed, (change if is_changed else Change.NO_CHANGE)


def judgment_key(fingerprint: str, prompt: Prompt) -> str:
    return hashlib.sha256(f"{fingerprint}:{prompt.hash}".encode()).hexdigest()[:24]


def read_judgments(path: Path) -> dict[str, dict]:
    """Successful judgments by key (a torn last line is skipped)."""
    if not path.exists():
        return {}
    return {r["key"]: r for r in iter_records(path) if not r.get("error")}


def judge_rows(rows: list[dict], judge, folder: Path) -> dict[tuple[str, str], dict]:
    """Judge every row not judged yet by this judge; sample key (attack, sample_id) -> judgment record."""
    runner = judge.runner
    fingerprint = fingerprint_hash({**runner.fingerprint(), "task": "rationale_change_v1"})
    path = folder / JUDGMENTS
    done = read_judgments(path)
    planned = {(r["attack"], r["sample_id"]): (r, judge_prompt(r)) for r in rows}
    keys = {k: judgment_key(fingerprint, p) for k, (_, p) in planned.items()}
    todo = {keys[k]: (k, p) for k, (_, p) in planned.items() if keys[k] not in done}
    log.info("rationale judge %s: %d rows, %d cached, %d calls", judge.name, len(planned), len(planned) - len(todo),
             len(todo))
    if todo:
        runner.check_ready()
        repair_torn_tail(path)
        with path.open("a", encoding="utf-8") as fh:
            requests = [Request(key=key, prompt=p) for key, (_, p) in todo.items()]
            for request, response in runner.generate(requests):
                (attack, sample_id), _ = todo[request.key]
                record = {"key": request.key, "judge": judge.name, "fingerprint": fingerprint, "attack": attack,
                          "sample_id": sample_id, "prompt_hash": request.prompt.hash, "text": response.text,
                          "error": response.error}
                if response.error is None:
                    try:
                        is_changed, change = parse_judgment(response.text)
                        record |= {"changed": is_changed, "change": change.value}
                    except ValueError as exc:
                        record["error"] = str(exc)
                append_record(fh, record)
                if record["error"] is None:
                    done[request.key] = record
                else:
                    log.warning("rationale judgment of %s / %s failed (retried next run): %s", attack, sample_id,
                                str(record["error"])[:200])
    return {k: done[keys[k]] for k in planned if keys[k] in done}


def cached_judgments(rows: list[dict], folder: Path) -> dict[tuple[str, str], dict]:
    """The latest cached judgment of each row by any judge, with no call (for rebuilding tables offline)."""
    out: dict[tuple[str, str], dict] = {}
    wanted = {(r["attack"], r["sample_id"]): judge_prompt(r).hash for r in rows}
    for rec in read_judgments(folder / JUDGMENTS).values():
        key = (rec["attack"], rec["sample_id"])
        if wanted.get(key) == rec.get("prompt_hash"):  # judged on these very rationales
            out[key] = rec
    return out
