"""The judgment cache: `judgments.jsonl` (append-only, fsync'd, keyed by judgment key) and its rows.

A torn last line (a kill mid-append) is skipped on read and cut off before the next append (`facet_probe.store.jsonl`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from facet_probe.judge.protocol import VERDICTS, JudgeCase, JudgeProtocol, Verdict, case_key, set_verdict_of
from facet_probe.store.jsonl import append_record, iter_records, repair_torn_tail
from facet_probe.store.run_folder import JUDGMENTS_FILE  # noqa: F401 (imported from here too)


def read_judgments(path: str | Path) -> dict[str, dict]:
    """Successful judgments by key (a torn last line is skipped; the latest record of a key wins)."""
    path = Path(path)
    if not path.exists():
        return {}
    return {rec["judgment_key"]: rec for rec in iter_records(path) if not rec.get("error")}


def read_unreadable(path: str | Path) -> list[dict]:
    """The latest unreadable-reply error of each case not judged since (`UnreadableReply.RETRY`): the cases
    a report counts as unreadable and leaves out."""
    path = Path(path)
    if not path.exists():
        return []
    latest = {rec["judgment_key"]: rec for rec in iter_records(path)}
    return [rec for rec in latest.values() if rec.get("error") and rec.get("unreadable")]


class JudgmentLog:
    """Appends judgments to `judgments.jsonl`, first cutting off a torn tail so no record glues onto it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, record: dict) -> None:
        append_record(self._fh, record)

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JudgmentLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _record(
    case: JudgeCase,
    key: str,
    call: str,
    judge: str,
    fingerprint: str,
    protocol: JudgeProtocol,
    text: str,
    error: str | None,
    set_verdict: Verdict | None,
    verdicts: list[Verdict] | None,
    usage: dict,
    cost: float | None,
    aliased_from: str | None = None,
    unreadable: bool = False,
) -> dict:
    """One case's judgment record: the case's identity and trials, and what the judge said (a record copied
    from another case's judgment of the same prompt names it in `aliased_from` and costs nothing)."""
    return {
        "judgment_key": key,
        "call_key": call,
        "aliased_from": aliased_from,
        "judge": judge,
        "judge_fingerprint": fingerprint,
        "protocol": str(protocol),
        "case": case.identity,
        "model": case.model,
        "item_id": case.item.item_id,
        "trial_keys": list(case.trial_keys),
        "ordering_idx": list(case.ordering_idx),
        "repeat_idx": list(case.repeat_idx),
        "set_verdict": set_verdict.__dict__ if set_verdict else None,
        "verdicts": [v.__dict__ for v in verdicts or []],
        "raw_output": text,
        "error": error,
        "unreadable": unreadable,  # the reply held no readable verdict (an error, or "?" counted in n)
        "answers_cut": list(case.cut),
        "usage": usage,
        "cost_usd": cost,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def alias_record(source: dict, case: JudgeCase, key: str, call: str, protocol: JudgeProtocol) -> dict:
    """`source`'s judgment (same judge, same prompt) as `case`'s own record, at no cost."""
    set_verdict = Verdict(**source["set_verdict"]) if source.get("set_verdict") else None
    verdicts = [Verdict(**v) for v in source["verdicts"]]
    return _record(case, key, call, source["judge"], source["judge_fingerprint"], protocol,
                   source.get("raw_output", ""), None, set_verdict, verdicts, {}, 0.0,
                   aliased_from=source["judgment_key"], unreadable=bool(source.get("unreadable")))


def call_key_of(record: dict) -> str:
    """The judge call a record came from (an older record's own key is its call key)."""
    return record.get("call_key") or record["judgment_key"]


def spread_older(records: Iterable[dict], cases: Iterable[JudgeCase]) -> list[dict]:
    """Records with every older one (one per prompt, credited to one case) copied, at no cost, to each case
    whose prompt read the same as its own case's (same question, answers and, if it judged gold, gold);
    an older record whose own case is not among `cases` is kept as it is."""
    records, cases = list(records), list(cases)
    same_prompt: dict[tuple, list[JudgeCase]] = defaultdict(list)
    own: dict[tuple, JudgeCase] = {}
    for case in cases:
        same_prompt[(case.item.question, case.answers)].append(case)
        own.setdefault((case.model, case.item.item_id, case.ordering_idx, case.repeat_idx), case)
    covered = {rec["call_key"] for rec in records if rec.get("case")}
    out = [rec for rec in records if rec.get("case")]
    for rec in records:
        if rec.get("case") or rec["judgment_key"] in covered:
            continue
        owner = own.get((rec["model"], rec["item_id"], tuple(rec["ordering_idx"]), tuple(rec["repeat_idx"])))
        if owner is None:
            out.append(rec)
            continue
        gold = any(v.get("gold_match") is not None for v in rec["verdicts"])
        for other in same_prompt[(owner.item.question, owner.answers)]:
            if not gold or other.item.gold == owner.item.gold:
                call = rec["judgment_key"]
                out.append(alias_record(rec, other, case_key(call, other), call, JudgeProtocol.PER_ANSWER))
    return out


ROW_COLUMNS = [
    "judge", "protocol", "model", "facet", "dataset", "item_id", "repeat_idx", "trial_key", "ordering_idx",
    "is_reference", "verdict", "verdict_label", "reason", "set_verdict", "set_reason", "gold_match",
    "judgment_key", "unreadable", "answer_cut",
]


def _rows_of(rec: dict) -> list[dict]:
    """One row per trial of a record; the set verdict (asked, or derived from per-answer ones) on each."""
    case = rec.get("case") or {"model": rec["model"], "facet": None, "dataset": None, "item_id": rec["item_id"],
                               "repeat_idx": rec["repeat_idx"][0] if rec["repeat_idx"] else 0}
    asked = rec.get("set_verdict")
    per_answer = {v["answer"]: v for v in rec["verdicts"]}
    set_label = asked["verdict"] if asked else set_verdict_of([v["verdict"] for v in rec["verdicts"]])
    cut = rec.get("answers_cut") or []  # absent in records written before it was kept
    rows = []
    for i, trial_key in enumerate(rec["trial_keys"]):
        v = per_answer.get(i + 1, {})
        rows.append({
            "judge": rec["judge"],
            "protocol": rec.get("protocol", str(JudgeProtocol.PER_ANSWER)),
            **case,
            "trial_key": trial_key,
            "ordering_idx": rec["ordering_idx"][i],
            "repeat_idx": rec["repeat_idx"][i],
            "is_reference": i == 0,
            "verdict": v.get("verdict"),
            "verdict_label": VERDICTS.get(v.get("verdict")),
            "reason": v.get("reason"),
            "set_verdict": set_label,
            "set_reason": asked["reason"] if asked else None,
            "gold_match": v.get("gold_match"),
            "judgment_key": rec["judgment_key"],
            "unreadable": bool(rec.get("unreadable")),
            "answer_cut": bool(cut[i]) if i < len(cut) else False,
        })
    return rows


def judgment_rows(records: Iterable[dict]) -> pd.DataFrame:
    """One row per judged trial (the reference answer included, with verdict None). An older record (one per
    prompt, credited to one case) is left out once cases of its call have their own records."""
    records = list(records)
    covered = {rec["call_key"] for rec in records if rec.get("case")}
    rows = [row for rec in records if rec.get("case") or rec["judgment_key"] not in covered
            for row in _rows_of(rec)]
    return pd.DataFrame(rows, columns=ROW_COLUMNS)
