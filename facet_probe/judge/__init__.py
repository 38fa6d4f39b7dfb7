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

from facet_probe.judge.agreement import cohens_kappa, judge_agreement, semantic_flip
from facet_probe.judge.cache import JUDGMENTS_FILE, judgment_rows, read_judgments
from facet_probe.judge.protocol import (
    JUDGE_SYSTEM,
    VERDICTS,
    JudgeCase,
    JudgeItem,
    JudgeParseError,
    Verdict,
    build_cases,
    judge_prompt,
    judgment_key,
    load_items,
    parse_verdicts,
)
from facet_probe.judge.run import LLMJudge, judge_run_folder, judge_trials

__all__ = [
    "JUDGE_SYSTEM",
    "JUDGMENTS_FILE",
    "VERDICTS",
    "JudgeCase",
    "JudgeItem",
    "JudgeParseError",
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
    "parse_verdicts",
    "read_judgments",
    "semantic_flip",
]
