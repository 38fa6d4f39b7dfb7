"""The run report's PNG figures: flip rate per cell, accuracy vs flip, accuracy per ordering index.

Pure plotting: frames in, figures out (`*_figure`), then saved atomically (the plain names). Matplotlib's
non-interactive backend, so it runs headless. Every figure keeps its labels and legend inside the canvas
(legends sit outside the axes, never on the data) and writes the value of a bar that is too short to see.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from facet_probe.metrics.flips import wilson_interval  # noqa: E402
from facet_probe.store.atomic import atomic_path  # noqa: E402

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def flip_rate_figure(summary: pd.DataFrame) -> Figure:
    """Horizontal bars: flip rate with its CI for every (model, facet, dataset) cell; each bar's value is
    written beside it, so a zero bar reads 0.000 instead of vanishing."""
    frame = summary.dropna(subset=["flip_rate"]).sort_values(["facet", "dataset", "model"]).reset_index(drop=True)
    labels = frame["model"].astype(str) + " | " + frame["facet"].astype(str) + " / " + frame["dataset"].astype(str)
    rate = frame["flip_rate"].to_numpy(dtype=float)
    lo = frame["flip_rate_lo"].fillna(frame["flip_rate"]).to_numpy(dtype=float)
    hi = frame["flip_rate_hi"].fillna(frame["flip_rate"]).to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(frame) + 1.6))
    y = np.arange(len(frame))
    ax.barh(y, rate, xerr=[np.clip(rate - lo, 0, None), np.clip(hi - rate, 0, None)], color="#4477aa",
            ecolor="#333333", capsize=2)
    for yi, r, h in zip(y, rate, hi, strict=True):
        ax.text(max(h, r) + 0.01, yi, f"{r:.3f}", va="center", ha="left", fontsize=7, color="#222222")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("flip rate with 95% CI\n(share of items whose answer changes across orderings)")
    ax.set_title("Order sensitivity per cell")
    return fig


def accuracy_vs_flip_figure(summary: pd.DataFrame) -> Figure:
    """Scatter: accuracy (x) against flip rate (y), one point per cell; colour says the model, marker the
    facet, both named in a legend beside the axes."""
    frame = summary.dropna(subset=["flip_rate", "accuracy"])
    models = sorted(frame["model"].astype(str).unique())
    facets = sorted(frame["facet"].astype(str).unique())
    colours = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for mi, model in enumerate(models):
        for fi, facet in enumerate(facets):
            group = frame[(frame["model"].astype(str) == model) & (frame["facet"].astype(str) == facet)]
            if not group.empty:
                ax.scatter(group["accuracy"], group["flip_rate"], s=36, color=colours(mi % colours.N),
                           marker=MARKERS[fi % len(MARKERS)], edgecolor="black", linewidth=0.4)
    handles = ([plt.Line2D([], [], ls="none", marker="o", color=colours(i % colours.N), label=m)
                for i, m in enumerate(models)]
               + [plt.Line2D([], [], ls="none", marker=MARKERS[i % len(MARKERS)], color="grey", label=f)
                  for i, f in enumerate(facets)])
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
              title="colour: model, marker: facet", title_fontsize=7)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("accuracy")
    ax.set_ylabel("flip rate")
    ax.set_title("Accuracy vs order sensitivity (one point per cell)")
    return fig


def accuracy_per_ordering_figure(trials: pd.DataFrame) -> Figure:
    """Dots with Wilson 95% CIs: accuracy at each ordering index per (model, facet). Ordering i is a
    different permutation for every item, so the indices are categories, not a trend: no lines join them."""
    t = trials.assign(correct=trials["correct"].astype(float)).dropna(subset=["correct"])
    acc = t.groupby(["model", "facet", "ordering_idx"])["correct"].agg(["sum", "count"]).reset_index()
    series = list(acc.groupby(["model", "facet"]))
    fig, ax = plt.subplots(figsize=(8, 4.8))
    width = 0.6 / max(len(series), 1)
    for si, ((model, facet), group) in enumerate(series):
        k, n = group["sum"].to_numpy(float), group["count"].to_numpy(float)
        lo, hi = wilson_interval(k, n)
        x = group["ordering_idx"].to_numpy(float) + (si - (len(series) - 1) / 2) * width
        ax.errorbar(x, k / n, yerr=[k / n - lo, hi - k / n], fmt=MARKERS[si % len(MARKERS)], linestyle="none",
                    ms=5, capsize=2, label=f"{model} | {facet}")
    orderings = sorted(acc["ordering_idx"].unique())
    ax.set_xticks(orderings)
    ax.set_xlabel("ordering index (0 = source order; each index is a different permutation per item)")
    ax.set_ylabel("accuracy (95% Wilson CI)")
    ax.set_ylim(-0.02, 1.05)
    ax.set_title("Accuracy per ordering")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return fig


def flip_rate_per_cell(summary: pd.DataFrame, path: Path) -> Path:
    return save(flip_rate_figure(summary), path)


def accuracy_vs_flip(summary: pd.DataFrame, path: Path) -> Path:
    return save(accuracy_vs_flip_figure(summary), path)


def accuracy_per_ordering(trials: pd.DataFrame, path: Path) -> Path:
    return save(accuracy_per_ordering_figure(trials), path)


def save(fig: Figure, path: Path) -> Path:
    """Lay the figure out so every label and legend is inside the canvas, then write it atomically. Where the
    layout cannot make room (it warns), the canvas grows to what is drawn instead: one more drawing pass, so
    only then (a figure's drawing is most of a small report's time)."""
    try:
        with warnings.catch_warnings(record=True) as unmet:
            warnings.simplefilter("always")
            fig.tight_layout()
        fig.set_layout_engine(None)  # laid out once: no placeholder engine, so savefig skips a second layout pass
        with atomic_path(path) as tmp:  # a kill mid-write never leaves a torn PNG
            fig.savefig(tmp, dpi=110, bbox_inches="tight" if unmet else None)  # a legend beside the axes kept whole
    finally:
        plt.close(fig)
    return path
