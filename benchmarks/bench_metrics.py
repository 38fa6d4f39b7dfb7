"""Time the metrics on a large synthetic audit: item metrics, cell CIs, paper tables, same-order control.

    python benchmarks/bench_metrics.py [--trials 400000] [--boot 1000] [--seed 0]

Synthetic trials look like a real run's: 4 models x 8 facets x 2 datasets, K = 6 orderings, MCQ facets
(4-10 options, source-order letters) and free-form facets (short normalised strings), ~3% parse
errors, and R = 3 repeats for the option_order cells. Prints seconds per stage (goal: all < 10 s).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.flips import cell_summary, item_metrics, paper_tables
from facet_probe.metrics.same_order import same_order_control

MODELS = ("qwen2.5-vl-7b", "gemma-3-12b", "llava-1.5-7b", "gpt-4o-mini")
FACETS = {  # facet: (multiple choice?, datasets)
    "option_order": (True, ("mmlu_pro", "mathvision")),
    "evidence_chunk_order": (False, ("hotpotqa", "musique")),
    "document_rank_order": (False, ("nq_open", "triviaqa")),
    "image_set_order": (True, ("blink", "muirbench")),
    "mixed_modality_order": (False, ("scienceqa", "infoseek")),
    "dialog_turn_order": (False, ("mt_bench", "coqa")),
    "few_shot_order": (True, ("arc", "hellaswag")),
    "tool_description_order": (False, ("bfcl", "toolbench")),
}
K, REPEATS, PARSE_ERROR_RATE = 6, 3, 0.03


def synthetic_trials(n_trials: int, seed: int) -> pd.DataFrame:
    """About `n_trials` trial records (one row per model x item x ordering x repeat)."""
    rng = np.random.default_rng(seed)
    cells = [(m, f, d, mcq, R) for m in MODELS for f, (mcq, ds) in FACETS.items() for d in ds
             for R in [REPEATS if f == "option_order" else 1]]
    per_item = sum(K * c[4] for c in cells)
    n_items = max(1, round(n_trials / per_item))
    frames = []
    for model, facet, dataset, mcq, repeats in cells:
        item = np.repeat(np.arange(n_items), K * repeats)
        ordering = np.tile(np.repeat(np.arange(K), repeats), n_items)
        repeat = np.tile(np.arange(repeats), n_items * K)
        n_opt = rng.integers(4, 11, size=n_items)[item] if mcq else np.zeros(len(item), dtype=int)
        stability = rng.beta(4, 1, size=n_items)[item]  # how often an item keeps its favourite answer
        favourite = rng.integers(0, 4, size=n_items)[item]
        other = rng.integers(0, 10, size=len(item))
        choice = np.where(rng.random(len(item)) < stability, favourite,
                          other % np.maximum(n_opt, 4) if mcq else other)
        answers = (np.array(list("ABCDEFGHIJ"))[choice] if mcq
                   else np.char.add(f"{dataset}-answer-", choice.astype(str)))
        parsed = rng.random(len(item)) >= PARSE_ERROR_RATE
        answers = np.where(parsed, answers, PARSE_ERROR)
        gold = "A" if mcq else f"{dataset}-answer-0"
        frames.append(pd.DataFrame({
            "model": model, "facet": facet, "dataset": dataset,
            "item_id": np.char.add(f"{dataset}::", item.astype(str)),
            "ordering_idx": ordering, "repeat_idx": repeat,
            "answer_normalized": answers, "gold_normalized": gold, "correct": answers == gold,
            "parse_status": np.where(parsed, "ok", "parse_error"),
            "score_kind": ("inverse_permutation" if facet == "option_order" else "letter") if mcq
            else "exact_match",
            "n_options": np.where(n_opt > 0, n_opt, np.nan),
            "ordering_key": ordering,
        }))
    frame = pd.concat(frames, ignore_index=True)
    perms = [tuple(int(x) for x in rng.permutation(5)) for _ in range(K)]  # K distinct-enough orderings
    frame["permutation"] = pd.Series([list(perms[o]) for o in frame.pop("ordering_key")])
    frame["trial_key"] = np.char.add("t", np.arange(len(frame)).astype(str))
    # one prompt per (model-independent) item x ordering, as the renderers' hashes would be
    frame["prompt_hash"] = (frame["facet"] + "|" + frame["item_id"] + "|" + frame["ordering_idx"].astype(str))
    return frame


def timed(label: str, fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    seconds = time.perf_counter() - t0
    print(f"{label:<34s} {seconds:7.2f} s")
    return out, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=400_000)
    ap.add_argument("--boot", type=int, default=1000, help="bootstrap replicates (cells and control)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    trials, _ = timed("generate synthetic trials", synthetic_trials, args.trials, args.seed)
    n_items = trials.groupby(["model", "facet", "dataset", "item_id"]).ngroup().max() + 1
    print(f"  {len(trials):,} trials, {n_items:,} (model, item) pairs, "
          f"{trials['parse_status'].eq('parse_error').mean():.1%} parse errors, "
          f"{(trials['repeat_idx'] > 0).sum():,} repeat trials")
    total = 0.0
    items, s = timed("item metrics", item_metrics, trials)
    total += s
    cells, s = timed(f"cell summaries ({args.boot} bootstrap)", cell_summary, items, n_boot=args.boot)
    total += s
    _, s = timed("paper aggregation", paper_tables, cells)
    total += s
    (_, control_cells), s = timed(f"same-order control ({args.boot} boot)", same_order_control, trials,
                                  n_boot=args.boot)
    total += s
    print(f"{'total (metrics + control)':<34s} {total:7.2f} s   (goal < 10 s)")
    print(f"  {len(items):,} item rows, {len(cells)} cells, "
          f"{control_cells['n_items_with_repeats'].gt(0).sum()} cells with repeats")


if __name__ == "__main__":
    main()
