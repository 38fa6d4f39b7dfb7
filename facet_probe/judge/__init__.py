"""LLM judge for free-form answers: does the meaning of an answer change with the presentation order?

A case is one model's K answers to one item in one facet and repeat (model, facet, dataset, item, repeat);
one judge call carries them all, and cases whose prompts read the same share a call while each keeps its
own verdicts. `judge.protocol=reference` (the default, FACET-PROBE v0.0.1) asks ONE verdict for the set:
A equivalent, B partial, C flip, D unparsable; a cell's sem-flip is (B + C) / n with D in n
(`sem_flip_set`). `per_answer` asks a verdict for each answer against answer 1 (lowest ordering) and also
gives `sem_flip_answers`, the share of answers judged B or C. With `gold_anchored`, the judge also says
whether each answer matches the short gold answer.

Judgments are cached in `judgments.jsonl` (append-only, fsync'd), one record per case keyed by the judge's
fingerprint, the exact judge prompt and the case; an older record (keyed by fingerprint and prompt alone)
is copied to each case of its prompt, so re-running resumes and never pays twice; a failed or unreadable
judge call is stored as an error and retried next time. Cohen's kappa measures agreement between judges.

    python -m facet_probe.judge input=<run folder> judge=gemini_pro
"""

from facet_probe.judge.agreement import cohens_kappa, judge_agreement, semantic_flip
from facet_probe.judge.cache import JUDGMENTS_FILE, judgment_rows, read_judgments
from facet_probe.judge.protocol import (
    JUDGE_SYSTEM,
    VERDICTS,
    JudgeCase,
    JudgeItem,
    JudgeParseError,
    JudgeProtocol,
    Verdict,
    build_cases,
    judge_prompt,
    judgment_key,
    load_items,
    parse_set_verdict,
    parse_verdicts,
)
from facet_probe.judge.run import LLMJudge, judge_run_folder, judge_trials, tabulate_run_folder

__all__ = [
    "JUDGE_SYSTEM",
    "JUDGMENTS_FILE",
    "VERDICTS",
    "JudgeCase",
    "JudgeItem",
    "JudgeParseError",
    "JudgeProtocol",
    "LLMJudge",
    "Verdict",
    "build_cases",
    "cohens_kappa",
    "judge_agreement",
    "judge_prompt",
    "judge_run_folder",
    "judge_trials",
    "judgment_key",
    "judgment_rows",
    "load_items",
    "parse_set_verdict",
    "parse_verdicts",
    "read_judgments",
    "semantic_flip",
    "tabulate_run_folder",
]
