"""The run report's PNG figures: flip rate per cell, accuracy vs flip, accuracy per ordering index.

Pure plotting: frames in, figures out (`*_figure`), then saved atomically (`save`); what a report's figures are
drawn from, and where, is `report.figure_process`. Matplotlib's
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
    """Horizontal bars: flip rate with its CI for every (model, facet, dataset) cell, grouped under a bold
    `facet / dataset` heading with one bar per model; each bar's value is written beside it, so a zero bar
    reads 0.000 instead of vanishing. (A label per bar repeating its facet and dataset was most of a
    paper-scale figure's glyphs and its drawing time.)"""
    frame = summary.dropna(subset=["flip_rate"]).sort_values(["facet", "dataset", "model"]).reset_index(drop=True)
    groups = (frame["facet"].astype(str) + " / " + frame["dataset"].astype(str)).to_numpy()
    starts = np.r_[True, groups[1:] != groups[:-1]] if len(frame) else np.zeros(0, bool)
    y = np.arange(len(frame)) + np.cumsum(starts)  # one heading row before each group's bars
    rate = frame["flip_rate"].to_numpy(dtype=float)
    lo = frame["flip_rate_lo"].fillna(frame["flip_rate"]).to_numpy(dtype=float)
    hi = frame["flip_rate_hi"].fillna(frame["flip_rate"]).to_numpy(dtype=float)
    rows = len(frame) + int(starts.sum())
    fig, ax = plt.subplots(figsize=(9, 0.3 * rows + 1.6))
    ax.barh(y, rate, xerr=[np.clip(rate - lo, 0, None), np.clip(hi - rate, 0, None)], color="#4477aa",
            ecolor="#333333", capsize=2)
    for yi, r, h in zip(y, rate, hi, strict=True):
        ax.text(max(h, r) + 0.01, yi, f"{r:.3f}", va="center", ha="left", fontsize=7, color="#222222")
    headings = y[starts] - 1
    ax.set_yticks(np.r_[headings, y], [*groups[starts], *frame["model"].astype(str)], fontsize=8)
    for label in ax.get_yticklabels()[:len(headings)]:
        label.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(rows - 0.4, -0.6)  # inverted (first cell on top), a fixed margin: 5% of 108 bars was 5 blank rows
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
    model_index = frame["model"].astype(str).map({m: i for i, m in enumerate(models)}).to_numpy()
    facet_of = frame["facet"].astype(str).to_numpy()
    for fi, facet in enumerate(facets):  # one artist per marker (a paper-scale figure drew 90, one per cell group)
        at = facet_of == facet
        ax.scatter(frame["accuracy"].to_numpy()[at], frame["flip_rate"].to_numpy()[at], s=36,
                   c=colours(model_index[at] % colours.N), marker=MARKERS[fi % len(MARKERS)], edgecolor="black",
                   linewidth=0.4)
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


def accuracy_per_ordering_figure(acc: pd.DataFrame) -> Figure:
    """Dots with Wilson 95% CIs: accuracy at each ordering index (`ordering_accuracy`), one panel per facet, one
    colour per model (named once, in a legend beside the panels). Ordering i is a different permutation for every
    item, so the indices are categories, not a trend: no lines join them. Panels keep a paper-scale panel (18 models
    x 5 facets) readable where one axes with 90 legend entries, one per (model, facet), was not."""
    facets = sorted(acc["facet"].unique())
    models = sorted(acc["model"].unique())
    colours = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    k, n = acc["sum"].to_numpy(float), acc["count"].to_numpy(float)
    lo, hi = wilson_interval(k, n)
    index = acc["model"].map({m: i for i, m in enumerate(models)}).to_numpy()
    offset = (index - (len(models) - 1) / 2) * 0.7 / max(len(models), 1)  # models side by side at each index
    acc = acc.assign(rate=k / n, lo=lo, hi=hi, index=index, marker=index // colours.N % len(MARKERS),
                     x=acc["ordering_idx"].to_numpy(float) + offset)
    ncols = min(len(facets), 3) or 1
    nrows = -(-len(facets) // ncols) or 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols + 1.8, 2.9 * nrows + 0.9), sharey=True,
                             squeeze=False)
    for ax, facet in zip(axes.flat, facets, strict=False):
        panel = acc[acc["facet"] == facet]
        # two artists a panel (CIs, dots), not three per model: a paper-scale figure drew 108 errorbars
        ax.vlines(panel["x"], panel["lo"], panel["hi"], colors=colours(panel["index"].to_numpy() % colours.N),
                  linewidth=1)
        for marker, part in panel.groupby("marker"):
            ax.scatter(part["x"], part["rate"], s=14, marker=MARKERS[marker], zorder=3,
                       c=colours(part["index"].to_numpy() % colours.N))
        ax.set_xticks(sorted(acc["ordering_idx"].unique()))
        ax.set_ylim(-0.02, 1.05)
        ax.set_title(facet, fontsize=9)
    for ax in axes.flat[len(facets):]:
        ax.set_visible(False)
    for i, ax in enumerate(axes.flat[:len(facets)]):
        if i + ncols >= len(facets):  # no panel below it
            ax.set_xlabel("ordering index")
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy (95% Wilson CI)")
    handles = [plt.Line2D([], [], ls="none", marker=MARKERS[(i // colours.N) % len(MARKERS)],
                          color=colours(i % colours.N), label=m) for i, m in enumerate(models)]
    axes[0, ncols - 1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                              borderaxespad=0, title="model", title_fontsize=7)
    fig.suptitle("Accuracy per ordering (0 = source order; each index is a different permutation per item)",
                 fontsize=10)
    return fig


def save(fig: Figure, path: Path, metadata: dict[str, str] | None = None) -> Path:
    """Lay the figure out so every label and legend is inside the canvas, then write it atomically (with
    `metadata` as PNG text). Where the layout cannot make room (it warns), the canvas grows to what is drawn
    instead: one more drawing pass, so only then (a figure's drawing is most of a small report's time)."""
    try:
        with warnings.catch_warnings(record=True) as unmet:
            warnings.simplefilter("always")
            fig.tight_layout()
        fig.set_layout_engine(None)  # laid out once: no placeholder engine, so savefig skips a second layout pass
        with atomic_path(path) as tmp:  # a kill mid-write never leaves a torn PNG
            # bbox_inches: a legend beside the axes kept whole
            fig.savefig(tmp, dpi=110, bbox_inches="tight" if unmet else None, metadata=metadata,
                        pil_kwargs={"compress_level": 1})
    finally:
        plt.close(fig)
    return path
