"""`table-mechanism`: why a flipped item flipped, labelled by three LLM judges (reasoning instability,
positional anchoring, other), and their agreement (Fleiss' kappa), as the FACET-PROBE paper's mechanism
analysis (225 items, kappa 0.28-0.30). The labelling prompt and its three labels' wording are ours (the
paper's prompt is not released).

Judges are `conf/judge/<name>.yaml` (their runners; the sem-flip protocol settings are not used). Each label
is cached in `mechanism_judgments.jsonl` beside the target's outputs (append-only, torn tail repaired, through
the judge package's `JudgmentLog`), keyed by the judge's runner fingerprint and the exact prompt, so a rebuild
resumes and never pays twice; a failed or unreadable reply is stored as an error and asked again next time."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from facet_probe.core.errors import ConfigError
from facet_probe.core.prompts import AnswerFormat, Message, Prompt, TextPart
from facet_probe.metrics.flips import ITEM_KEYS
from facet_probe.paper import inputs, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput
from facet_probe.store.jsonl import iter_records

log = logging.getLogger("facet_probe.paper")
CACHE_FILE = "mechanism_judgments.jsonl"
MAX_REPLY_CHARS = 1500  # a reply longer than this is cut to its last characters in the prompt (the answer)


class Mechanism(StrEnum):
    REASONING_INSTABILITY = "reasoning_instability"
    POSITIONAL_ANCHORING = "positional_anchoring"
    OTHER = "other"


#: The letter a judge replies with for each label.
LETTERS = {"R": Mechanism.REASONING_INSTABILITY, "P": Mechanism.POSITIONAL_ANCHORING, "O": Mechanism.OTHER}

SYSTEM = ("You analyse why a model's answer to a question changed when the same evidence was shown in a "
          "different order. You reply with JSON only.")

INSTRUCTION = (
    "The model answered the same question {k} times; each time the same evidence (options, documents, images, "
    "...) was shown in a different order, and its final answer was not always the same. Say what most likely "
    "made the answer change:\n"
    "R = reasoning instability: the reasoning itself differs between orderings (other facts used, other steps, "
    "other conclusions from the same evidence);\n"
    "P = positional anchoring: the answer follows where things were shown (it favours what comes first or "
    "last), not what they say;\n"
    "O = other (a reply that cannot be read, a refusal, or no clear pattern).")


@dataclass(frozen=True)
class FlipCase:
    """One flipped item of one model: the question and, per ordering, the order shown, the reply and the answer."""

    model: str
    facet: str
    dataset: str
    item_id: str
    question: str
    orderings: tuple[tuple[tuple[str, ...], str, str], ...]  # (component ids as shown, reply, parsed answer)


def mechanism_prompt(case: FlipCase) -> Prompt:
    """The labelling prompt of one case (deterministic: its hash keys the cache)."""
    lines = [INSTRUCTION.format(k=len(case.orderings)), "", f"Question: {case.question}", ""]
    for i, (shown, reply, answer) in enumerate(case.orderings, 1):
        text = reply if len(reply) <= MAX_REPLY_CHARS else "..." + reply[-MAX_REPLY_CHARS:]
        lines += [f"Ordering {i} (shown in this order: {', '.join(shown)}):", f"Reply: {text or '(empty)'}",
                  f"Final answer: {answer}", ""]
    lines.append('Reply with JSON only: {"label": "R" | "P" | "O", "reason": "<at most 20 words>"}')
    return Prompt(system=SYSTEM, messages=(Message("user", (TextPart("\n".join(lines)),)),),
                  answer_format=AnswerFormat.FREE)


def parse_label(text: str) -> tuple[Mechanism, str]:
    """The label and reason of a judge's reply (JSON, possibly fenced); ValueError when it names no label."""
    match = re.search(r"\{.*\}", text or "", re.S)
    try:
        data = json.loads(match.group(0)) if match else {}
    except json.JSONDecodeError:
        data = {}
    raw = str(data.get("label", "")).strip()
    label = LETTERS.get(raw.upper()[:1]) if raw else None
    if raw.lower() in set(Mechanism):
        label = Mechanism(raw.lower())
    if label is None:
        raise ValueError(f"no mechanism label (R, P or O) in the reply: {(text or '')[:120]!r}")
    return label, str(data.get("reason", ""))


def flip_cases(flipped: pd.DataFrame, trials: pd.DataFrame, questions: Mapping[tuple[str, str], str]
               ) -> list[FlipCase]:
    """The cases of the flipped items (`flipped`: rows with ITEM_KEYS) from their repeat-0 trials."""
    first = trials[trials["repeat_idx"].fillna(0) == 0]
    groups = dict(iter(first.groupby(ITEM_KEYS, sort=True)))
    cases = []
    for key in flipped[ITEM_KEYS].itertuples(index=False, name=None):
        rows = groups.get(tuple(key))
        if rows is None:
            continue
        rows = rows.sort_values("ordering_idx")
        orderings = tuple((tuple(map(str, r.component_ids)), str(r.raw_output or ""), str(r.answer_normalized))
                          for r in rows.itertuples())
        model, facet, dataset, item_id = key
        cases.append(FlipCase(model, facet, dataset, item_id, questions.get((dataset, item_id), ""), orderings))
    return cases


def sample_cases(cases: list[FlipCase], max_items: int | None, seed: int) -> list[FlipCase]:
    """At most `max_items` cases, a seeded draw that does not depend on the order they came in (None: all)."""
    if max_items is None or len(cases) <= max_items:
        return cases
    rank = {c: hashlib.sha256(f"{seed}|{c.model}|{c.facet}|{c.dataset}|{c.item_id}".encode()).hexdigest()
            for c in cases}
    return sorted(sorted(cases, key=rank.__getitem__)[:max_items], key=lambda c: (c.model, c.facet, c.dataset, c.item_id))


def load_judges(names: Iterable[str], settings: Mapping[str, Mapping] | None = None) -> list:
    """The `LLMJudge` of each `conf/judge/<name>.yaml`, with `settings[name]` merged into its config, its key
    checked before any call."""
    from hydra.utils import instantiate
    from omegaconf import DictConfig, OmegaConf

    from facet_probe.config.loading import load_option

    judges = []
    for name in names:
        node = cast(DictConfig, OmegaConf.merge(load_option("judge", str(name)), (settings or {}).get(name) or {}))
        if not node.get("_target_"):
            raise ConfigError(f"judge {name} has no runner (judge=none is not a judge); name three judge configs")
        judge = instantiate(node, _convert_="all")
        judge.runner.check_ready()
        judges.append(judge)
    return judges


def judge_key(fingerprint: str, prompt: Prompt) -> str:
    return hashlib.sha256(f"{fingerprint}|{prompt.hash}".encode()).hexdigest()[:24]


def read_labels(path: Path) -> dict[str, dict]:
    """Successful labels by key (the latest record of a key wins; a torn last line is skipped)."""
    return {r["key"]: r for r in iter_records(path) if not r.get("error")} if path.is_file() else {}


def label_cases(cases: list[FlipCase], judges: list, cache: Path) -> pd.DataFrame:
    """One row per case and judge that has a label (cached or asked now)."""
    from facet_probe.core.trials import fingerprint_hash
    from facet_probe.judge.cache import JudgmentLog
    from facet_probe.runners.base import Request

    cached = read_labels(cache)
    rows = []
    for judge in judges:
        fingerprint = fingerprint_hash(judge.runner.fingerprint())
        planned = {judge_key(fingerprint, p): (c, p) for c in cases for p in [mechanism_prompt(c)]}
        todo = [Request(key=k, prompt=p) for k, (_, p) in planned.items() if k not in cached]
        log.info("table-mechanism: judge %s, %d cases, %d cached, %d to ask", judge.name, len(planned),
                 len(planned) - len(todo), len(todo))
        if todo:
            with JudgmentLog(cache) as out:
                for request, response in judge.runner.generate(todo):
                    case = planned[request.key][0]
                    record = {"key": request.key, "judge": judge.name, "judge_fingerprint": fingerprint,
                              **{k: getattr(case, k) for k in ("model", "facet", "dataset", "item_id")},
                              "raw_output": response.text, "error": response.error, "usage": response.usage}
                    if response.error is None:
                        try:
                            label, reason = parse_label(response.text)
                            record |= {"label": str(label), "reason": reason}
                        except ValueError as exc:
                            record["error"] = str(exc)
                    out.append(record)
                    if record["error"] is None:
                        cached[request.key] = record
                    else:
                        log.warning("table-mechanism: %s on %s failed (asked again next build): %s", judge.name,
                                    case.item_id, str(record["error"])[:200])
        rows += [{**{k: getattr(c, k) for k in ("model", "facet", "dataset", "item_id")}, "judge": judge.name,
                  "label": cached[k]["label"], "reason": cached[k].get("reason", "")}
                 for k, (c, _) in planned.items() if k in cached]
    return pd.DataFrame(rows, columns=[*ITEM_KEYS, "judge", "label", "reason"])


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of an items x categories table of rater counts (every item rated by the same number of
    raters); NaN when chance agreement is perfect (every rating in one category)."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=1)
    if len(counts) == 0 or not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("Fleiss' kappa needs every item rated by the same number (>= 2) of raters")
    p_cat = counts.sum(axis=0) / counts.sum()
    p_item = ((counts * (counts - 1)).sum(axis=1)) / (n[0] * (n[0] - 1))
    p_bar, p_e = p_item.mean(), float((p_cat ** 2).sum())
    return float("nan") if p_e == 1 else float((p_bar - p_e) / (1 - p_e))


def mechanism_tables(labels: pd.DataFrame, n_judges: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per item the judges' labels and the majority (None on a three-way split); and per label the count and
    share by each judge and by majority, with Fleiss' kappa over the items every judge labelled."""
    wide = labels.pivot_table(index=ITEM_KEYS, columns="judge", values="label", aggfunc="first")
    complete = wide.dropna()
    counts = np.array([[int((row == m).sum()) for m in Mechanism] for row in complete.to_numpy()]).reshape(-1, 3)
    kappa = fleiss_kappa(counts) if len(complete) and n_judges >= 2 else float("nan")
    per_item = wide.reset_index()
    per_item["majority"] = [next((str(m) for m in Mechanism if int((r == m).sum()) * 2 > n_judges), None)
                            for r in wide.to_numpy()]
    rows = []
    for m in Mechanism:
        row: dict[str, Any] = {"label": str(m)}
        for judge in wide.columns:
            row[f"n_{judge}"] = int((wide[judge] == m).sum())
        row["n_majority"] = int((per_item["majority"] == str(m)).sum())
        row["share_majority"] = row["n_majority"] / len(per_item) if len(per_item) else float("nan")
        rows.append(row)
    summary = pd.DataFrame(rows).assign(n_items=len(per_item), n_items_all_judges=len(complete),
                                        n_judges=n_judges, fleiss_kappa=kappa)
    return summary, per_item


def table_mechanism(ctx: Inputs) -> list[Path]:
    """Why flipped items flipped: three LLM judges label each (reasoning instability, positional anchoring,
    other; our prompt), the counts per judge and by majority, and Fleiss' kappa (the paper: 225 items)."""
    from facet_probe.runners.base import RunnerError
    from facet_probe.runners.cost.ledger import COST_FILE, Budget, CostLedger, budget_setting, model_spend
    from facet_probe.runners.cost.paid import with_paid_runner
    from facet_probe.runners.cost.prices import load_price_table
    from facet_probe.store.run_folder import RunFolder, read_items

    settings = ctx.mechanism or {}
    names = list(settings.get("judges") or [])
    if len(names) < 2:
        raise MissingInput(f"table-mechanism needs at least two judges (mechanism.judges={names}); the paper used "
                           "three (conf/judge/)")
    flipped = ctx.items[ctx.items["flip"] == 1]
    if flipped.empty:
        raise MissingInput("no flipped item in the inputs: table-mechanism labels why items flipped")
    folders = inputs.run_folders(ctx.paths)
    questions = {(rec["dataset"], rec["item_id"]): rec.get("question", "")
                 for rec in read_items(RunFolder(f).items_file for f in folders).values()}
    cases = flip_cases(flipped, inputs.read_trials(ctx.paths), questions)
    cases = sample_cases(cases, settings.get("max_items"), ctx.seed)
    try:
        judges = load_judges(names, settings.get("judge_settings"))
    except (ConfigError, RunnerError) as exc:  # a judge without its key: the others' targets still build
        raise MissingInput(f"table-mechanism: {exc}") from None
    ctx.out.mkdir(parents=True, exist_ok=True)
    # the judges' calls are paid: priced into out/cost.json and kept within mechanism.budget_usd (every build)
    budget = Budget(budget_setting(settings), spent_before=sum(model_spend(ctx.out).values()),
                    scope=f"by the mechanism judges in {ctx.out}")
    ledger = CostLedger(ctx.out / COST_FILE, budget, load_price_table())
    judges = [with_paid_runner(judge, ledger) for judge in judges]
    try:
        labels = label_cases(cases, judges, ctx.out / CACHE_FILE)
    finally:
        for judge in judges:
            judge.runner.close()
    summary, per_item = mechanism_tables(labels, len(judges))
    stopped = (f" Labelling stopped at mechanism.budget_usd={ledger.budget_usd:g} (cost.json): items some judge "
               "has not labelled are left out of kappa; raise it and rebuild to label the rest."
               if ledger.stopped else "")
    caption = (f"Mechanism of {len(per_item)} flipped items labelled by {len(judges)} LLM judges "
               f"({', '.join(names)}; our prompt, facet_probe/paper/mechanism.py): reasoning instability, positional "
               "anchoring or other, count per judge and by majority (2 of 3); Fleiss' kappa over the items every "
               "judge labelled (the paper: 225 items, kappa 0.28-0.30)." + stopped)
    files = render.write_table(summary, ctx.out, "table_mechanism", caption)
    files += render.write_table(per_item, ctx.out, "table_mechanism_items", "Each flipped item's labels per judge.")
    files += render.write_table(labels, ctx.out, "table_mechanism_labels", "Every label with the judge's reason.")
    return files
