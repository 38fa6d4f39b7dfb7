"""The judgment cache: `judgments.jsonl` (append-only, fsync'd, keyed by judgment key) and its rows.

A torn last line (a kill mid-append) is skipped on read and cut off before the next append (`facet_probe.jsonl`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from facet_probe.jsonl import append_record, iter_records, repair_torn_tail
from facet_probe.judge.protocol import VERDICTS, JudgeCase, Verdict

JUDGMENTS_FILE = "judgments.jsonl"


def read_judgments(path: str | Path) -> dict[str, dict]:
    """Successful judgments by key (a torn last line is skipped; the latest record of a key wins)."""
    path = Path(path)
    if not path.exists():
        return {}
    return {rec["judgment_key"]: rec for rec in iter_records(path) if not rec.get("error")}


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
