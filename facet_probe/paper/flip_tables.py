"""`table1` and `fig-flip-facets`: the flip rate per model and facet (Table 1, beside the paper's values where the
population matches) and its bar chart (Figure 2), both from the one bootstrap of `Inputs.flip_table`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from facet_probe.facets import MAIN_FACETS
from facet_probe.facets.registry import default_datasets
from facet_probe.paper import published, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.report import table1 as t1


def table1(ctx: Inputs) -> list[Path]:
    """Table 1: model x facet flip rate with intervals, mean5, panel mean; the paper's values beside ours."""
    table = ctx.flip_table
    long = t1.same_population(table, ctx.items, published.table1(), default_datasets())
    shown = t1.wide(table, long[["model", "facet", "paper_flip"]]).reset_index()
    compared = long["paper_flip"].notna().any()
    caption = ("K=6 flip rate per model and facet: unweighted mean over each facet's datasets (image set: "
               "position-reference screened items; mixed modality: the primary judge's sem-flip where judged, "
               "else exact match), mean5 over the five main facets, panel mean over models; 95% item-bootstrap "
               "percentile intervals (Wilson where the bootstrap degenerates), models held fixed. "
               + ("The paper's value and our difference are shown only where model, facet and datasets match "
                  "the paper's." if compared else "No row measures the paper's population (its model on its "
                  "datasets), so the paper's values are not shown; table1.csv's paper_population says why."))
    return render.write_table(long, ctx.out, "table1", caption, latex=shown)


def fig_flip_facets(ctx: Inputs) -> list[Path]:
    """Figure 2: flip rate per facet, one bar per model, with intervals and the value on every bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = ctx.flip_table
    table = table[(table["model"] != t1.PANEL) & (table["facet"] != t1.MEAN5)]
    facets = [f for f in MAIN_FACETS if f in set(table["facet"])] + sorted(set(table["facet"]) - set(MAIN_FACETS))
    models = sorted(set(table["model"]))
    width = 0.8 / max(len(models), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(facets) + 0.4 * len(models)), 4.2))
    for j, model in enumerate(models):
        rows = table[table["model"] == model].set_index("facet").reindex(facets)
        x = np.arange(len(facets)) + (j - (len(models) - 1) / 2) * width
        err = np.vstack([rows["flip"] - rows["flip_lo"], rows["flip_hi"] - rows["flip"]]).clip(min=0)
        bars = ax.bar(x, rows["flip"], width, yerr=err, capsize=2, label=model)
        for xi, v, top in zip(x, rows["flip"], rows["flip_hi"], strict=True):
            if not np.isnan(v):  # above the interval, so a zero bar shows its value too
                ax.annotate(f"{v:.2f}", (xi, top), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7, color=bars.patches[0].get_facecolor())
    ax.set_xticks(np.arange(len(facets)), [f.replace("_", " ") for f in facets], rotation=15, ha="right")
    ax.set_ylabel("K=6 flip rate (95% CI)")
    ax.set_ylim(0, 1.15)
    ax.set_title("Flip rate per facet across models")
    ax.legend(fontsize=8, ncol=min(len(models), 4), loc="upper left", bbox_to_anchor=(0, -0.25), frameon=False)
    return render.write_figure(fig, ctx.out, "fig_flip_facets")
