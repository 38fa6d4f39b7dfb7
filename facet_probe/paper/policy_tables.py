"""`table4-mitigation`, `fig-pareto` and `table-k-ablation`: the mitigation policies P1-P6 (Table 4, the K=2/3
detector), their cost-accuracy Pareto front and the K ablation, all from the policies' per-item outcomes
(`Inputs.policy_items`, `policies`)."""

from __future__ import annotations

from pathlib import Path

from facet_probe.paper import pareto, policies, published, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput


def table4_mitigation(ctx: Inputs) -> list[Path]:
    """Table 4: P1-P6 per cell and their means over cells, with cost, beside the paper's values only where model,
    facet and dataset match; and K=2 / K=3 disagreement as a detector of K=6 flips."""
    cells = published.beside_policy_cells(ctx.policy_table)
    means = published.beside_policy_means(policies.policy_means(ctx.policy_table), cells)
    caption = ("Mitigation policies from the stored K=6 trials: " + policies.SUBSETS_READ[ctx.subsets] + "; mean "
               "over cells, unweighted; cost in calls and tokens per item; an abstaining policy's accuracy is over "
               "what it answers (per item, then over the items it answers), coverage and all-items accuracy "
               "(accuracy x coverage: an abstention counted wrong) beside it, as the paper's; P5 and P6 are oracles "
               "(they use the gold answer). The paper's values only where model, facet, dataset and quantity match: "
               "its mean over the cells we share (paper_*) beside ours over the same cells (*_matched); here: "
               + "; ".join(dict.fromkeys(means["paper_population"])) + ".")
    shown = means[[c for c in ("policy", "oracle", "accuracy", "coverage", "all_items_accuracy", "calls_per_item",
                               "tokens_per_item", "n_cells", "n_cells_matched", "accuracy_matched", "paper_accuracy",
                               "paper_difference") if c in means]]
    files = render.write_table(means, ctx.out, "table4_mitigation", caption, latex=shown)
    files += render.write_table(cells, ctx.out, "table4_mitigation_cells",
                                "Mitigation policies per cell; the paper's value and the difference where the paper "
                                "has the same model, facet and dataset.")
    detector = policies.detector_table(ctx.policy_items)
    files += render.write_table(detector, ctx.out, "table4_detector", policies.DETECTOR_READ[ctx.subsets])
    return files


def fig_pareto(ctx: Inputs) -> list[Path]:
    """The cost-accuracy Pareto front of the policies P1-P6 (means over cells, read as `ctx.subsets` says), each
    at its accuracy over all items (an abstention counts as wrong, its coverage beside it); the oracles, which use
    the gold answer, are reference marks off the front. Prompt mitigations are compared in
    `table-prompt-mitigation`, not here."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = policies.policy_means(ctx.policy_table)
    means["on_front"] = pareto.policy_front(means)
    y = pareto.PLACED_AT
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    front = means[means["on_front"]].sort_values("calls_per_item")
    ax.plot(front["calls_per_item"], front[y], "-", color="tab:blue", alpha=0.6, label="Pareto front")
    for r in means.itertuples():
        value = getattr(r, y)
        if r.oracle:  # a bound that reads the gold answer, not a policy one could run
            ax.scatter(r.calls_per_item, value, s=45, marker="D", facecolors="none", edgecolors="dimgray", zorder=3)
            text = f"{r.policy} oracle {value:.3f}"
        else:
            ax.scatter(r.calls_per_item, value, s=45, color="tab:blue" if r.on_front else "tab:gray", zorder=3)
            text = f"{r.policy} {value:.3f}" + (f" (coverage {r.coverage:.2f}; {r.accuracy:.3f} on answered)"
                                                if r.coverage < 1 else "")
        ax.annotate(text, (r.calls_per_item, value), xytext=(-6, 4) if r.oracle else (5, 4), fontsize=8,
                    textcoords="offset points", ha="right" if r.oracle else "left",
                    color="dimgray" if r.oracle else "black")
    ax.scatter([], [], s=45, marker="D", facecolors="none", edgecolors="dimgray",
               label="oracle (uses the gold answer): a bound, off the front")
    ax.set_xlabel("calls per item")
    ax.set_ylabel("accuracy over all items (mean over cells)")
    ax.set_xticks(sorted(set(means["calls_per_item"])))
    ax.margins(x=0.25, y=0.12)
    ax.set_title("Cost-accuracy of the mitigation policies\n(an abstention counts as wrong)", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)  # off the points
    files = render.write_figure(fig, ctx.out, "fig_pareto")
    caption = ("Policy means over cells, each placed at its accuracy over all items (all_items_accuracy: an "
               "abstention counts as wrong; an abstaining policy's accuracy on what it answers and its coverage "
               "beside it; " + policies.SUBSETS_READ[ctx.subsets] + "); "
               "on_front: on the cost-accuracy front of the runnable policies; an oracle (oracle = true: it uses "
               "the gold answer) is a reference bound, never on the front.")
    files += render.write_table(means, ctx.out, "pareto_points", caption)
    return files


def table_k_ablation(ctx: Inputs) -> list[Path]:
    """Flips found from the first K' = 2..K orderings of the same trials, and the share of K=6 flips found."""
    table = policies.k_ablation(ctx.policy_items)
    if table.empty:
        raise MissingInput("the K ablation needs K >= 2 orderings per cell (a flip is seen between two): run the "
                           "audit with k=6 (the paper's K)")
    pooled = table.groupby("k", sort=True)[["flip_rate", "recall_of_full_k"]].mean().reset_index()
    files = render.write_table(table, ctx.out, "table_k_ablation_cells", "K ablation per cell.")
    files += render.write_table(pooled, ctx.out, "table_k_ablation",
                                "Flip rate from the first K' orderings and recall of K=6 flips, mean over cells.")
    return files
