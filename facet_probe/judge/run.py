"""Running a judge: judge trials through a runner with the cache, the configured `LLMJudge`, and judging a
finished run folder."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from facet_probe.core.trials import fingerprint_hash
from facet_probe.judge.agreement import judge_agreement, semantic_flip
from facet_probe.judge.cache import (
    JudgmentLog,
    _record,
    alias_record,
    call_key_of,
    judgment_rows,
    read_judgments,
    read_unreadable,
    spread_older,
)
from facet_probe.judge.protocol import (
    UNREADABLE,
    JudgeItem,
    JudgeParseError,
    JudgeProtocol,
    UnreadableReply,
    Verdict,
    build_cases,
    call_key,
    judge_items,
    judge_prompt,
    judgment_key,
    load_items,
    parse_set_verdict,
    parse_verdicts,
)
from facet_probe.runners.base import Request, Runner
from facet_probe.store.csv_tables import write_csv
from facet_probe.store.run_folder import RunFolder

log = logging.getLogger("facet_probe.judge")  # the logger name of the former single module


def judge_fingerprint(runner: Runner, protocol: JudgeProtocol, gold_anchored: bool,
                      max_answer_chars: int | None, unreadable: UnreadableReply = UnreadableReply.RETRY) -> str:
    """Hash of the judge's settings; the per-answer protocol (and the default `unreadable`) hash as they did
    before these options existed, so an older cache keeps its keys."""
    settings = {**runner.fingerprint(), "gold_anchored": gold_anchored, "max_answer_chars": max_answer_chars}
    if protocol != JudgeProtocol.PER_ANSWER:
        settings["protocol"] = str(protocol)
    if unreadable != UnreadableReply.RETRY:  # a "?" is kept for good: never mixed with a cache that retries
        settings["unreadable"] = str(unreadable)
    return fingerprint_hash(settings)


def parse_reply(protocol: JudgeProtocol, text: str, n_answers: int,
                gold_anchored: bool) -> tuple[Verdict | None, list[Verdict]]:
    """The set verdict (reference protocol) and the per-answer verdicts of a judge's reply."""
    if protocol == JudgeProtocol.REFERENCE:
        return parse_set_verdict(text, n_answers, gold_anchored)
    return None, parse_verdicts(text, n_answers, gold_anchored)


def judge_trials(
    trials_frame: pd.DataFrame,
    items: Mapping[str, Any] | Iterable[Any],
    judge_runner: Runner,
    cache_path: str | Path,
    *,
    judge_name: str | None = None,
    protocol: JudgeProtocol | str = JudgeProtocol.PER_ANSWER,
    gold_anchored: bool = False,
    max_answer_chars: int | None = 2000,
    unreadable: UnreadableReply | str = UnreadableReply.RETRY,
) -> pd.DataFrame:
    """Judge every (model, facet, dataset, free-form item, repeat) case of the trials; one row per judged
    trial. Cases whose prompts read the same share one call and each gets its own record; a case whose
    prompt was judged before (for another case, or by an older cache) copies that judgment at no cost.

    Judgments that fail (API error, unreadable reply) are stored as errors, left out of the frame and
    retried on the next call; with `unreadable=count` (FACET-PROBE v0.0.1) an unreadable reply is kept as
    set verdict "?" instead, counted in n. This function asks per answer unless told; the judge configs (`LLMJudge`)
    default to the reference's set-level protocol.
    """
    protocol, unreadable = JudgeProtocol(protocol), UnreadableReply(unreadable)
    pool: Iterable[Any] = items.values() if isinstance(items, Mapping) else items
    by_id = {ji.item_id: ji for ji in (JudgeItem.of(it) for it in pool)}
    name = judge_name or judge_runner.name
    fingerprint = judge_fingerprint(judge_runner, protocol, gold_anchored, max_answer_chars, unreadable)
    cache_path = Path(cache_path)
    cached = read_judgments(cache_path)
    planned = []  # (case, prompt, call key, judgment key)
    for case in build_cases(trials_frame, by_id, max_answer_chars, protocol):
        prompt = judge_prompt(case, gold_anchored, protocol)
        planned.append((case, prompt, call_key(fingerprint, prompt), judgment_key(fingerprint, prompt, case)))
    judged_calls = {call_key_of(rec): rec for rec in cached.values()}
    missing = [p for p in planned if p[3] not in cached]
    aliases = [p for p in missing if p[2] in judged_calls]
    calls: dict[str, list] = {}
    for p in missing:
        if p[2] not in judged_calls:
            calls.setdefault(p[2], []).append(p)
    log.info("judge %s (%s): %d cases, %d cached, %d copied from the same prompt, %d calls for %d cases",
             name, protocol, len(planned), len(planned) - len(missing), len(aliases), len(calls),
             len(missing) - len(aliases))
    if aliases or calls:
        if calls:
            judge_runner.check_ready()
        with JudgmentLog(cache_path) as judgments:  # cuts off a torn tail before appending
            for case, _, call, key in aliases:
                record = alias_record(judged_calls[call], case, key, call, protocol)
                judgments.append(record)
                cached[key] = record
            todo = [Request(key=call, prompt=group[0][1]) for call, group in calls.items()]
            for request, response in judge_runner.generate(todo) if todo else ():
                group = calls[request.key]
                error, set_verdict, verdicts, unread = response.error, None, None, False
                if error is None:
                    try:
                        set_verdict, verdicts = parse_reply(
                            protocol, response.text, len(group[0][0].answers), gold_anchored)
                    except JudgeParseError as exc:
                        unread = True
                        if unreadable == UnreadableReply.COUNT:  # the reference's "?", kept and counted in n
                            set_verdict, verdicts = Verdict(0, UNREADABLE, str(exc)[:300]), []
                        else:
                            error = str(exc)
                first = None
                for case, _, call, key in group:  # the first case carries the call's usage and cost
                    record = _record(case, key, call, name, fingerprint, protocol, response.text, error,
                                     set_verdict, verdicts, response.usage if first is None else {},
                                     response.provenance.get("cost_usd") if first is None else 0.0,
                                     aliased_from=first, unreadable=unread)
                    first = first or key
                    judgments.append(record)
                    if error is None:
                        cached[key] = record
                if error is not None:
                    log.warning("judgment of %s / %s failed (retried next run): %s",
                                group[0][0].model, group[0][0].item.item_id, error[:200])
    return judgment_rows(cached[p[3]] for p in planned if p[3] in cached)


class LLMJudge:
    """A configured judge (`judge=gemini_pro`): a runner plus the protocol options."""

    def __init__(
        self, *, name: str, runner: Runner, protocol: JudgeProtocol | str = JudgeProtocol.REFERENCE,
        gold_anchored: bool = False, max_answer_chars: int | None = 2000,
        unreadable: UnreadableReply | str = UnreadableReply.RETRY,
    ) -> None:
        self.name = name
        self.runner = runner
        self.protocol = _protocol(protocol)
        self.unreadable = _choice("unreadable", unreadable, UnreadableReply)
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
            protocol=self.protocol,
            gold_anchored=self.gold_anchored,
            max_answer_chars=self.max_answer_chars,
            unreadable=self.unreadable,
        )


def _choice(key: str, value, kind):
    """The member of `kind` a judge config's `key` names, or one clear message listing the choices."""
    try:
        return kind(value)
    except ValueError:
        from facet_probe.core.errors import ConfigError

        choices = ", ".join(p.value for p in kind)
        raise ConfigError(f"judge.{key}={value!r}: choose one of {choices}") from None


def _protocol(value: JudgeProtocol | str) -> JudgeProtocol:
    """The protocol a config names, or one clear message listing the choices."""
    return _choice("protocol", value, JudgeProtocol)


# -- a run folder ----------------------------------------------------------------------------------
def judge_run_folder(run_dir: str | Path, judge: LLMJudge) -> dict[str, pd.DataFrame]:
    """Judge a finished run folder; write judgments.csv, semantic_flip.csv and judge_agreement.csv."""
    from facet_probe.scoring.run_trials import CALL_RECORDS, read_run

    folder = RunFolder(Path(run_dir))
    if not folder.items_file.is_file():
        raise FileNotFoundError(f"{folder.path}: no {folder.items_file.name} (is it a run folder?)")
    run = read_run(folder, drop=CALL_RECORDS)  # the cases read replies, not what the calls cost
    try:
        judge.judge(run.trials, judge_items(run.items), folder.judgments_file)  # this run's trials only
    finally:
        judge.runner.close()
    return tabulate_run_folder(folder.path, run.trials)


@dataclass(frozen=True)
class JudgeTables:
    """What the judges said about a report's trials: one row per judged trial (`judgments`), the per-case
    sem-flips (`semantic_flip`) and Cohen's kappa between judges (`judge_agreement`), each derived from the
    rows, so the tables of several run folders are their rows put together."""

    judgments: pd.DataFrame
    semantic_flip: pd.DataFrame
    judge_agreement: pd.DataFrame
    #: The tables' names, the stems of their CSV files in a judged or reported folder.
    NAMES: ClassVar[tuple[str, ...]] = ("judgments", "semantic_flip", "judge_agreement")

    @classmethod
    def of(cls, judgments: pd.DataFrame) -> JudgeTables:
        return cls(judgments, semantic_flip(judgments), judge_agreement(judgments))

    def frames(self) -> dict[str, pd.DataFrame]:
        """The tables by file stem (judgments.csv, semantic_flip.csv, judge_agreement.csv)."""
        return {name: getattr(self, name) for name in self.NAMES}


def folder_judgments(run_dir: str | Path, trials: pd.DataFrame) -> pd.DataFrame | None:
    """One row per judged trial of a run folder's judgments.jsonl (every judge), with no call; None when the
    folder was not judged. A record from before cases had their own is copied to every case of its prompt
    among the folder's `trials`."""
    folder = RunFolder(Path(run_dir))
    if not folder.judgments_file.is_file():
        return None
    items = load_items(folder.items_file)
    cases = build_cases(trials, items, None, JudgeProtocol.PER_ANSWER) if items and len(trials) else []
    judged = spread_older(read_judgments(folder.judgments_file).values(), cases)
    return judgment_rows([*judged, *read_unreadable(folder.judgments_file)])  # unreadable: set verdict NaN


def judge_tables_of(folders: Iterable[str | Path], trials: pd.DataFrame) -> JudgeTables | None:
    """The judge tables of every judged run folder among `folders`, put together (a report over several run
    folders reads each one's judges); None when none was judged. `trials` are the one folder's; with several
    folders, each judged one's own trials are read (`scoring.run_trials.read_run`)."""
    from facet_probe.scoring.run_trials import CALL_RECORDS, read_run

    folders = list(dict.fromkeys(Path(f) for f in folders))
    rows = [folder_judgments(f, trials if len(folders) == 1 else read_run(f, drop=CALL_RECORDS).trials)
            for f in folders if RunFolder(Path(f)).judgments_file.is_file()]
    return JudgeTables.of(pd.concat(rows, ignore_index=True)) if rows else None


def tabulate_run_folder(run_dir: str | Path, trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """judgments.csv, semantic_flip.csv and judge_agreement.csv of every judge in the folder's judgments.jsonl,
    with no call (`folder_judgments`), written in the folder."""
    run_dir = Path(run_dir)
    tables = JudgeTables.of(folder_judgments(run_dir, trials) if RunFolder(run_dir).judgments_file.is_file()
                            else judgment_rows([]))
    write_judge_tables(tables, run_dir)
    return tables.frames()


def write_judge_tables(tables: JudgeTables, folder: Path) -> list[Path]:
    """The judge tables as CSV files in `folder` (each written atomically)."""
    return [write_csv(frame, folder / f"{name}.csv") for name, frame in tables.frames().items()]
