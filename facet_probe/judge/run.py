"""Running a judge: judge trials through a runner with the cache, the configured `LLMJudge`, and judging a
finished run folder."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from facet_probe.atomic import atomic_path
from facet_probe.judge.agreement import judge_agreement, semantic_flip
from facet_probe.judge.cache import JUDGMENTS_FILE, JudgmentLog, _record, judgment_rows, read_judgments
from facet_probe.judge.protocol import (
    JudgeItem,
    JudgeParseError,
    build_cases,
    judge_prompt,
    judgment_key,
    load_items,
    parse_verdicts,
)
from facet_probe.runners.base import Request, Runner
from facet_probe.trials import fingerprint_hash

log = logging.getLogger("facet_probe.judge")  # the logger name of the former single module


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
        with JudgmentLog(cache_path) as judgments:  # cuts off a torn tail before appending
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
                judgments.append(record)
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


# -- a run folder ----------------------------------------------------------------------------------
def judge_run_folder(run_dir: str | Path, judge: LLMJudge) -> dict[str, pd.DataFrame]:
    """Judge a finished run folder; write judgments.csv, semantic_flip.csv and judge_agreement.csv."""
    from facet_probe.run_trials import read_run

    run_dir = Path(run_dir)
    items_path = run_dir / "items.jsonl"
    if not items_path.is_file():
        raise FileNotFoundError(f"{run_dir}: no items.jsonl (is it a run folder?)")
    cache = run_dir / JUDGMENTS_FILE
    try:
        judge.judge(read_run(run_dir).trials, load_items(items_path), cache)  # this run's trials only
    finally:
        judge.runner.close()
    every = judgment_rows(read_judgments(cache).values())  # all judges so far, for agreement
    out = {
        "judgments": every,
        "semantic_flip": semantic_flip(every),
        "judge_agreement": judge_agreement(every),
    }
    for name, frame in out.items():
        with atomic_path(run_dir / f"{name}.csv") as tmp:
            frame.to_csv(tmp, index=False)
    return out
