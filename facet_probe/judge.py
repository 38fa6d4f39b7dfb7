"""LLM judge for free-form answers: does the meaning of an answer change with the presentation order?

One judge call per (model, item) carries all K answers of that model to that item. The first answer (lowest
ordering, then repeat) is the reference; each other answer gets a verdict against it: A equivalent,
B partial (overlapping but not the same), C flip (a different answer), D unparsable (no answer can be read),
each with a short reason. The semantic flip rate of an item is the share of B or C among its verdicts. With
`gold_anchored`, the judge also says whether each answer matches the short gold answer.

Judgments are cached in `judgments.jsonl` (append-only, fsync'd), keyed by a hash of the judge's
fingerprint and the exact judge prompt, so re-running resumes and never pays twice; a failed or unreadable
judge call is stored as an error and retried next time. Cohen's kappa measures agreement between judges.

    python -m facet_probe.judge input=<run folder> judge=gemini_pro
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from facet_probe.items import AnswerType, Item
from facet_probe.prompts import AnswerFormat, Message, Prompt, TextPart
from facet_probe.runners.base import Request, Runner
from facet_probe.trial_io import iter_records
from facet_probe.trials import fingerprint_hash

log = logging.getLogger(__name__)

VERDICTS = {"A": "equivalent", "B": "partial", "C": "flip", "D": "unparsable"}
JUDGMENTS_FILE = "judgments.jsonl"


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


# -- agreement statistics (pure) ---------------------------------------------------------------------
def cohens_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels for the same cases (nan when chance agreement is total)."""
    if len(a) != len(b):
        raise ValueError(f"two raters need the same cases, got {len(a)} and {len(b)} labels")
    n = len(a)
    if n == 0:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    cats = set(a) | set(b)
    expected = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in cats)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else float("nan")
    return (observed - expected) / (1 - expected)


def semantic_flip(judged: pd.DataFrame) -> pd.DataFrame:
    """Per (judge, model, item): verdict counts and the semantic flip rate, share of B or C."""
    rows = judged[judged["verdict"].notna()]
    if rows.empty:
        return pd.DataFrame(
            columns=["judge", "model", "item_id", *(f"n_{c}" for c in VERDICTS), "n_judged", "semantic_flip"]
        )
    counts = (
        rows.groupby(["judge", "model", "item_id"])["verdict"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=list(VERDICTS), fill_value=0)
    )
    counts.columns = [f"n_{c}" for c in counts.columns]
    counts["n_judged"] = counts.sum(axis=1)
    counts["semantic_flip"] = (counts["n_B"] + counts["n_C"]) / counts["n_judged"]
    return counts.reset_index()


def judge_agreement(judged: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa and raw agreement between every pair of judges, on the answers both judged."""
    out = []
    rows = judged[judged["verdict"].notna()]
    for j1, j2 in combinations(sorted(rows["judge"].unique()), 2):
        both = rows[rows["judge"] == j1].merge(
            rows[rows["judge"] == j2], on="trial_key", suffixes=("_1", "_2")
        )
        a, b = both["verdict_1"].tolist(), both["verdict_2"].tolist()
        flip_a = [v in ("B", "C") for v in a]
        flip_b = [v in ("B", "C") for v in b]
        out.append(
            {
                "judge_1": j1,
                "judge_2": j2,
                "n": len(both),
                "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(both)
                if len(both)
                else None,
                "kappa": cohens_kappa(a, b),
                "kappa_flip": cohens_kappa(flip_a, flip_b),
            }
        )
    return pd.DataFrame(out, columns=["judge_1", "judge_2", "n", "agreement", "kappa", "kappa_flip"])


# -- the cache ---------------------------------------------------------------------------------------
def read_judgments(path: str | Path) -> dict[str, dict]:
    """Successful judgments by key (a torn last line is skipped; the latest record of a key wins)."""
    path = Path(path)
    if not path.exists():
        return {}
    return {rec["judgment_key"]: rec for rec in iter_records(path) if not rec.get("error")}


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _record(
    case: JudgeCase,
    key: str,
    judge: str,
    fingerprint: str,
    text: str,
    error: str | None,
    verdicts: list[Verdict] | None,
    usage: dict,
    cost: float | None,
) -> dict:
    return {
        "judgment_key": key,
        "judge": judge,
        "judge_fingerprint": fingerprint,
        "model": case.model,
        "item_id": case.item.item_id,
        "trial_keys": list(case.trial_keys),
        "ordering_idx": list(case.ordering_idx),
        "repeat_idx": list(case.repeat_idx),
        "verdicts": [v.__dict__ for v in verdicts or []],
        "raw_output": text,
        "error": error,
        "usage": usage,
        "cost_usd": cost,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def judgment_rows(records: Iterable[dict]) -> pd.DataFrame:
    """One row per judged trial (the reference included, with verdict None)."""
    rows = []
    for rec in records:
        for v in rec["verdicts"]:
            i = v["answer"] - 1
            rows.append(
                {
                    "judge": rec["judge"],
                    "model": rec["model"],
                    "item_id": rec["item_id"],
                    "trial_key": rec["trial_keys"][i],
                    "ordering_idx": rec["ordering_idx"][i],
                    "repeat_idx": rec["repeat_idx"][i],
                    "is_reference": i == 0,
                    "verdict": v["verdict"],
                    "verdict_label": VERDICTS.get(v["verdict"]),
                    "reason": v["reason"],
                    "gold_match": v.get("gold_match"),
                    "judgment_key": rec["judgment_key"],
                }
            )
    columns = [
        "judge",
        "model",
        "item_id",
        "trial_key",
        "ordering_idx",
        "repeat_idx",
        "is_reference",
        "verdict",
        "verdict_label",
        "reason",
        "gold_match",
        "judgment_key",
    ]
    return pd.DataFrame(rows, columns=columns)


# -- the judge ---------------------------------------------------------------------------------------
def judge_trials(
    trials_frame: pd.DataFrame,
    items: Mapping[str, Any] | Iterable[Any],
    judge_runner: Runner,
    cache_path: str | Path,
    *,
    judge_name: str | None = None,
    gold_anchored: bool = False,
    max_answer_chars: int = 2000,
) -> pd.DataFrame:
    """Judge every (model, free-form item) of the trials, reusing cached judgments; one row per judged trial.

    Judgments that fail (API error, unreadable reply) are stored as errors, left out of the frame and
    retried on the next call.
    """
    pool = items.values() if isinstance(items, Mapping) else items
    by_id = {ji.item_id: ji for ji in (JudgeItem.of(it) for it in pool)}
    name = judge_name or judge_runner.name
    fingerprint = fingerprint_hash(
        {**judge_runner.fingerprint(), "gold_anchored": gold_anchored, "max_answer_chars": max_answer_chars}
    )
    cases = build_cases(trials_frame, by_id, max_answer_chars)
    cache_path = Path(cache_path)
    cached = read_judgments(cache_path)
    prompts = {
        judgment_key(fingerprint, p): (case, p) for case in cases for p in [judge_prompt(case, gold_anchored)]
    }
    todo = [Request(key=k, prompt=p) for k, (_, p) in prompts.items() if k not in cached]
    log.info(
        "judge %s: %d cases, %d cached, %d to call", name, len(prompts), len(prompts) - len(todo), len(todo)
    )
    if todo:
        judge_runner.check_ready()
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        for request, response in judge_runner.generate(todo):
            case = prompts[request.key][0]
            error, verdicts = response.error, None
            if error is None:
                try:
                    verdicts = parse_verdicts(response.text, len(case.answers), gold_anchored)
                except JudgeParseError as exc:
                    error = str(exc)
            record = _record(
                case,
                request.key,
                name,
                fingerprint,
                response.text,
                error,
                verdicts,
                response.usage,
                response.provenance.get("cost_usd"),
            )
            _append(cache_path, record)
            if error is None:
                cached[request.key] = record
            else:
                log.warning(
                    "judgment of %s / %s failed (retried next run): %s",
                    case.model,
                    case.item.item_id,
                    error[:200],
                )
    return judgment_rows(cached[k] for k in prompts if k in cached)


class LLMJudge:
    """A configured judge (`judge=gemini_pro`): a runner plus the protocol options."""

    def __init__(
        self, *, name: str, runner: Runner, gold_anchored: bool = False, max_answer_chars: int = 2000
    ) -> None:
        self.name = name
        self.runner = runner
        self.gold_anchored = gold_anchored
        self.max_answer_chars = max_answer_chars

    def judge(
        self, trials: pd.DataFrame, items: Mapping[str, Any] | Iterable[Any], cache_path: str | Path
    ) -> pd.DataFrame:
        return judge_trials(
            trials,
            items,
            self.runner,
            cache_path,
            judge_name=self.name,
            gold_anchored=self.gold_anchored,
            max_answer_chars=self.max_answer_chars,
        )


# -- CLI ---------------------------------------------------------------------------------------------
def judge_run_folder(run_dir: str | Path, judge: LLMJudge) -> dict[str, pd.DataFrame]:
    """Judge a finished run folder; write judgments.csv, semantic_flip.csv and judge_agreement.csv."""
    from facet_probe.trial_io import load_trial_frame

    run_dir = Path(run_dir)
    items_path = run_dir / "items.jsonl"
    if not items_path.is_file():
        raise FileNotFoundError(f"{run_dir}: no items.jsonl (is it a run folder?)")
    cache = run_dir / JUDGMENTS_FILE
    try:
        judge.judge(load_trial_frame(run_dir), load_items(items_path), cache)
    finally:
        judge.runner.close()
    every = judgment_rows(read_judgments(cache).values())  # all judges so far, for agreement
    out = {
        "judgments": every,
        "semantic_flip": semantic_flip(every),
        "judge_agreement": judge_agreement(every),
    }
    for name, frame in out.items():
        frame.to_csv(run_dir / f"{name}.csv", index=False)
    return out


def main() -> None:
    import hydra
    from hydra.utils import instantiate
    from omegaconf import DictConfig

    @hydra.main(config_path="conf", config_name="judge_app", version_base=None)
    def _run(cfg: DictConfig) -> None:
        if not cfg.get("judge"):
            raise SystemExit("judge=none: choose a judge, e.g. judge=gemini_pro or judge=gpt_54_mini")
        judge = instantiate(cfg.judge)
        out = judge_run_folder(cfg.input, judge)
        spent = judge.runner.cost_summary() if hasattr(judge.runner, "cost_summary") else {}
        if spent:
            print(
                f"judge calls this run: {spent.get('calls', 0)} ({spent.get('errors', 0)} failed), "
                f"estimated cost ${spent.get('cost_usd', 0):.4f}"
            )
        flips = out["semantic_flip"]
        for (judge, model), group in flips.groupby(["judge", "model"]):
            mean = group["semantic_flip"].mean()
            print(f"{judge} on {model}: {len(group)} items, mean semantic flip {mean:.3f}")
        for row in out["judge_agreement"].itertuples():
            print(f"kappa({row.judge_1}, {row.judge_2}) = {row.kappa:.3f} on {row.n} answers")
        print(f"wrote judgments.csv, semantic_flip.csv, judge_agreement.csv in {cfg.input}")

    _run()


if __name__ == "__main__":  # run the importable module's main, so instantiated judges share its classes
    from facet_probe.judge import main as _main

    _main()
