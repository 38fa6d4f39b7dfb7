"""Time the judge's tables at paper scale: the cases built from the trials, the sem-flip per case, the judges'
agreement and the trials rescored by the judges' gold match, as the judge, the report, the paper and ODI compute
them from stored trials and judgments (no call).

    python benchmarks/bench_judge_tables.py [--items 500] [--models 18] [--seed 0]

Synthetic free-form trials: `--models` models x 3 free-form facets x `--items` items, K = 6 orderings; two judges,
each giving the set a verdict, every answer but the reference its own and a gold match, 1% of replies unreadable. Prints the
rows and seconds per stage. To compare two commits, run it with `PYTHONPATH=<a worktree of the other>`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from facet_probe.judge.agreement import judge_agreement, semantic_flip
from facet_probe.judge.protocol import JudgeItem, build_cases
from facet_probe.judge.tables import with_gold_match

FACETS = ("evidence_chunk_order", "document_rank_order", "mixed_modality_order")
JUDGES = ("gemini_pro", "gpt_54_mini")
K = 6


def synthetic_trials(n_models: int, n_items: int, seed: int) -> tuple[pd.DataFrame, dict[str, JudgeItem]]:
    """One row per model x facet x item x ordering, and the free-form items by id."""
    rng = np.random.default_rng(seed)
    items = {f"{facet}::{i}": JudgeItem(f"{facet}::{i}", f"question {i}?", "gold", "free")
             for facet in FACETS for i in range(n_items)}
    ids = np.array(list(items))
    n = n_models * len(ids) * K
    model = np.repeat([f"model-{m}" for m in range(n_models)], len(ids) * K)
    item = np.tile(np.repeat(ids, K), n_models)
    trials = pd.DataFrame({
        "model": model, "item_id": item, "facet": [i.split("::")[0] for i in item], "dataset": "d",
        "ordering_idx": np.tile(np.arange(K), n_models * len(ids)), "repeat_idx": 0,
        "trial_key": [f"t{i}" for i in range(n)], "parse_status": "ok",
        "raw_output": np.char.add("Answer: ", rng.integers(0, 3, n).astype(str)),
        "answer_raw": rng.integers(0, 3, n).astype(str)})
    trials["answer_normalized"], trials["gold_normalized"] = trials["answer_raw"], "0"
    trials["correct"], trials["score_kind"] = trials["answer_raw"] == "0", "exact_match"
    return trials, items


def synthetic_judgments(trials: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Each judge's verdicts on every answer (the reference's None) and a set verdict per case."""
    rng = np.random.default_rng(seed + 1)
    frames = []
    for judge in JUDGES:
        n = len(trials)
        reference = trials["ordering_idx"].to_numpy() == 0
        verdict = np.where(reference, None, rng.choice(list("ABCD"), n, p=[0.7, 0.1, 0.15, 0.05]))
        case = np.arange(n) // K
        unreadable = np.repeat(rng.random(n // K) < 0.01, K)
        frames.append(trials[["model", "facet", "dataset", "item_id", "repeat_idx", "trial_key",
                              "ordering_idx"]].assign(
            judge=judge, protocol="per_answer", verdict=np.where(unreadable, None, verdict),
            set_verdict=np.where(unreadable, None, np.repeat(rng.choice(list("ABCD"), n // K), K)),
            judgment_key=[f"{judge}-{c}" for c in case], unreadable=unreadable, answer_cut=False,
            gold_match=np.where(unreadable, None, rng.random(n) < 0.6)))
    return pd.concat(frames, ignore_index=True)


def timed(label: str, work):
    start = time.perf_counter()
    out = work()
    print(f"{label:<16} {len(out):>9,} rows  {time.perf_counter() - start:8.2f} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=500, help="items per facet")
    parser.add_argument("--models", type=int, default=18)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    trials, items = synthetic_trials(args.models, args.items, args.seed)
    judged = synthetic_judgments(trials, args.seed)
    print(f"{len(trials):,} trials, {len(judged):,} judgment rows ({len(JUDGES)} judges)")
    timed("build_cases", lambda: build_cases(trials, items))
    timed("semantic_flip", lambda: semantic_flip(judged))
    timed("judge_agreement", lambda: judge_agreement(judged))
    timed("with_gold_match", lambda: with_gold_match(trials, judged))


if __name__ == "__main__":
    main()
