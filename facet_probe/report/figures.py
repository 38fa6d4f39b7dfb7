"""The run report's PNG figures: flip rate per cell, accuracy vs flip, accuracy across orderings per cell.

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
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

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


#: A scatter marker's area in points^2 (6 points across), and the least distance between two markers' centres.
MARKER_AREA = 36
MARKER_GAP_IN = 1.25 * 6 / 72


def scatter_axes_inches(figure_inches: np.ndarray, legend_labels: list[str]) -> np.ndarray:
    """At most how wide and tall a scatter's axes will be once laid out beside its legend, in inches: the figure
    less its labels' and ticks' room (1.2 in each way) and a legend as wide as 7-point text of its longest label
    can be. Markers are spread and margins sized for this, so both hold on the axes the layout gives, without a
    layout pass to measure them (a third of a small report's figure time)."""
    longest = max(map(len, legend_labels), default=0)
    return np.maximum(np.asarray(figure_inches, dtype=float) - [1.2 + 0.6 + 0.056 * longest, 1.2], 1.5)


def spread(points: np.ndarray, gap: float, high: np.ndarray, rings: int = 12) -> np.ndarray:
    """Where to draw `points` ((n, 2), in inches) so that no two lie closer than `gap`: each in turn keeps its place
    where that is free, else takes the nearest free place on rings around it (ring k: k * gap away, 6k places)
    within [0, high]; one with no free place within `rings` rings stays where it is. Cells at one value (six
    oracle cells at accuracy 1, flip 0) then each show."""
    placed = np.empty((0, 2))
    for point in np.clip(np.asarray(points, dtype=float), 0, high):
        spot = point
        for ring in range(rings + 1):
            angles = np.linspace(0, 2 * np.pi, 6 * ring, endpoint=False) if ring else np.zeros(1)
            options = np.clip(point + ring * gap * np.c_[np.cos(angles), np.sin(angles)], 0, high)
            if len(placed):  # the options no placed point is nearer to than `gap`
                nearest = np.hypot(*(options[:, None, :] - placed[None, :, :]).transpose(2, 0, 1)).min(axis=1)
                options = options[nearest >= gap - 1e-9]
            if len(options):
                spot = options[np.argmin(np.hypot(*(options - point).T))]
                break
        placed = np.vstack([placed, spot])
    return placed


def _interval(frame: pd.DataFrame, column: str) -> np.ndarray:
    """(2, n) distances from each value down to its interval's low end and up to its high end (0 where none)."""
    value = frame[column].to_numpy(dtype=float)
    lo = frame.get(f"{column}_lo", frame[column]).fillna(frame[column]).to_numpy(dtype=float)
    hi = frame.get(f"{column}_hi", frame[column]).fillna(frame[column]).to_numpy(dtype=float)
    return np.vstack([np.clip(value - lo, 0, None), np.clip(hi - value, 0, None)])


def accuracy_vs_flip_figure(summary: pd.DataFrame) -> Figure:
    """Scatter: accuracy (x) against flip rate (y) with both 95% CIs as error bars, one point per cell; colour
    says the model, marker the facet and dataset (two datasets of a facet apart), all named in a legend beside
    the axes. Cells at (nearly) one value are spread apart so each marker shows, a grey line leading back to the
    value, and the axes leave room for a whole marker at 0 and 1."""
    frame = summary.dropna(subset=["flip_rate", "accuracy"]).sort_values(["facet", "dataset", "model"])
    frame = frame.reset_index(drop=True)
    models = sorted(frame["model"].astype(str).unique())
    groups = (frame["facet"].astype(str) + " / " + frame["dataset"].astype(str)).to_numpy()
    names = sorted(set(groups))
    colours = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    index = frame["model"].astype(str).map({m: i for i, m in enumerate(models)}).to_numpy(dtype=int)
    colour = colours(index % colours.N).reshape(-1, 4)
    fig, ax = plt.subplots(figsize=(8, max(4.8, 0.19 * (len(models) + len(names)) + 1.2)))  # room for the legend
    handles = ([plt.Line2D([], [], ls="none", marker="o", color=colours(i % colours.N), label=m)
                for i, m in enumerate(models)]
               + [plt.Line2D([], [], ls="none", marker=MARKERS[i % len(MARKERS)], color="grey", label=g)
                  for i, g in enumerate(names)])
    ax.set_xlabel("accuracy (95% CI)")
    ax.set_ylabel("flip rate (95% CI)")
    ax.set_title("Accuracy vs order sensitivity (one point per cell)")
    title = "colour: model, marker: facet / dataset"
    scale = scatter_axes_inches(fig.get_size_inches(), [str(h.get_label()) for h in handles] + [title]) / 1.1
    pad = (MARKER_GAP_IN / 2 + 0.06) / scale  # in data units: a whole marker (and some air) inside at 0 and 1
    ax.set_xlim(-pad[0], 1 + pad[0])
    ax.set_ylim(-pad[1], 1 + pad[1])
    value = frame[["accuracy", "flip_rate"]].to_numpy(dtype=float)
    at = spread(value * scale, MARKER_GAP_IN, scale) / scale
    moved = np.flatnonzero(np.hypot(*(at - value).T) > 1e-9)
    if len(moved):
        ax.add_collection(LineCollection(list(np.stack([value[moved], at[moved]], axis=1)), colors="#999999",
                                         linewidths=0.6, zorder=1))
        title += "\ncells at one value drawn apart,\na grey line leading to the value"
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
              title=title, title_fontsize=7)
    bars = ax.errorbar(at[:, 0], at[:, 1], xerr=_interval(frame, "accuracy"), yerr=_interval(frame, "flip_rate"),
                       fmt="none", elinewidth=0.6, alpha=0.6, zorder=2)
    for lines in bars.lines[2]:
        lines.set_color(colour)
    for i, name in enumerate(names):  # one artist per marker
        mine = groups == name
        ax.scatter(at[mine, 0], at[mine, 1], s=MARKER_AREA, c=colour[mine], marker=MARKERS[i % len(MARKERS)],
                   edgecolor="black", linewidth=0.4, zorder=3)
    return fig


#: How the accuracy-across-orderings figure draws each statistic: label, marker and its row's vertical offset.
ORDERING_STATS = {"best_ordering_accuracy": ("best ordering (right under some ordering)", "^", -0.22),
                  "accuracy": ("expected: one call (share of orderings right)", "o", 0.0),
                  "worst_ordering_accuracy": ("worst ordering (right under every ordering)", "v", 0.22)}


def accuracy_per_ordering_figure(cells: pd.DataFrame) -> Figure:
    """Per cell (`metrics.flips.ordering_accuracy`), how its accuracy moves with the ordering: the best ordering's,
    the expected (one call's) and the worst ordering's accuracy, each with its 95% CI, on a grey box spanning the
    swing. One panel per facet / dataset (three to a row; a cell is never pooled with another dataset's), one row
    per model, the statistics named once in a legend beside the panels."""
    frame = cells.dropna(subset=["accuracy"]).sort_values(["facet", "dataset", "model"]).reset_index(drop=True)
    groups = (frame["facet"].astype(str) + " / " + frame["dataset"].astype(str)).to_numpy()
    names = list(dict.fromkeys(groups))
    models = sorted(frame["model"].astype(str).unique())
    row = frame["model"].astype(str).map({m: i for i, m in enumerate(models)}).to_numpy()
    ncols = min(len(names), 3) or 1
    nrows = -(-len(names) // ncols) or 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols + 2.6, max(0.26 * len(models) + 1.1, 1.8) * nrows + 0.5),
                             sharex=True, sharey=True, squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        panel = frame[groups == name]
        y = row[groups == name]
        worst = panel["worst_ordering_accuracy"].to_numpy(dtype=float)
        ax.barh(y, panel["best_ordering_accuracy"].to_numpy(dtype=float) - worst, left=worst, height=0.7,
                color="#e6e6e6", zorder=1)  # the swing: from the worst ordering's accuracy to the best's
        for column, (label, marker, shift) in ORDERING_STATS.items():
            ax.errorbar(panel[column], y + shift, xerr=_interval(panel, column), fmt=marker, markersize=4,
                        elinewidth=0.8, capsize=1.5, label=label, zorder=3)
        ax.set_title(name, fontsize=9)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    ax = axes[0, 0]
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_ylim(max(len(models), 1) - 0.5, -0.5)  # first model on top, half a row of margin
    ax.set_xlim(-0.05, 1.05)  # a whole marker at 0 and at 1
    for i, panel in enumerate(axes.flat[:len(names)]):
        panel.tick_params(axis="y", length=0, labelsize=8)
        if i + ncols >= len(names):  # no panel below it
            panel.set_xlabel("accuracy (95% CI)", fontsize=9)
            panel.tick_params(axis="x", labelbottom=True)
    axes[0, ncols - 1].legend(*axes[0, 0].get_legend_handles_labels(), fontsize=7, loc="upper left",
                              bbox_to_anchor=(1.04, 1.0), borderaxespad=0, title="per cell, over its items",
                              title_fontsize=7)
    fig.suptitle("Accuracy across orderings per cell: best, expected (one call) and worst ordering", fontsize=10)
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
