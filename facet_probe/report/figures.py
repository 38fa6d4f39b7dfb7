"""The run report's PNG figures: flip rate per cell, accuracy vs flip, accuracy per ordering index.

Pure plotting: frames in, files out. Matplotlib's non-interactive backend, so it runs headless.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from facet_probe.atomic import atomic_path  # noqa: E402


def flip_rate_per_cell(summary: pd.DataFrame, path: Path) -> Path:
    """Horizontal bars: flip rate with its bootstrap CI for every (model, facet, dataset) cell."""
    frame = summary.sort_values(["facet", "dataset", "model"]).reset_index(drop=True)
    labels = frame["model"] + " | " + frame["facet"] + " / " + frame["dataset"]
    err = [frame["flip_rate"] - frame["flip_rate_lo"], frame["flip_rate_hi"] - frame["flip_rate"]]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(frame) + 1.2))
    ax.barh(range(len(frame)), frame["flip_rate"], xerr=err, color="#4477aa", ecolor="#333333", capsize=2)
    ax.set_yticks(range(len(frame)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("flip rate (share of items whose answer changes across orderings), 95% CI")
    ax.set_title("Order sensitivity per cell")
    return _save(fig, path)


def accuracy_vs_flip(summary: pd.DataFrame, path: Path) -> Path:
    """Scatter: accuracy (x) against flip rate (y), one point per cell, coloured by facet."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for facet, group in summary.groupby("facet"):
        ax.scatter(group["accuracy"], group["flip_rate"], label=facet, s=30)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("accuracy")
    ax.set_ylabel("flip rate")
    ax.set_title("Accuracy vs order sensitivity")
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def accuracy_per_ordering(trials: pd.DataFrame, path: Path) -> Path:
    """Lines: accuracy at each ordering index (0 = canonical order) per facet and model."""
    acc = (trials.assign(correct=trials["correct"].astype(float))
           .groupby(["model", "facet", "ordering_idx"])["correct"].mean().reset_index())
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for (model, facet), group in acc.groupby(["model", "facet"]):
        ax.plot(group["ordering_idx"], group["correct"], marker="o", label=f"{model} | {facet}")
    ax.set_xlabel("ordering index (0 = canonical)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Accuracy per ordering")
    ax.legend(fontsize=6, loc="best")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:  # a kill mid-write never leaves a torn PNG
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return path
