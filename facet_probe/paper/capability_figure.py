"""`fig-capability`: capability (accuracy and theta) against flip rate per model, with the ODI app's Spearman rho
and its bootstrap interval (`capability_flip.csv`, read, not recomputed)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from facet_probe.odi.convergence import caption_note
from facet_probe.paper import render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput
from facet_probe.paper.odi_tables import odi_fit, odi_folders


def fig_capability(ctx: Inputs) -> list[Path]:
    """Capability (accuracy and theta) against flip rate per model, with the ODI app's Spearman rho and its
    bootstrap interval (`capability_flip.csv`, read, not recomputed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text

    files = []
    folders = odi_folders(ctx)
    for folder in folders:
        name = "fig_capability" + (f"_{folder.name}" if len(folders) > 1 else "")
        if not (folder / "capability_flip.csv").is_file() or not (folder / "model_flip_rates.csv").is_file():
            continue
        rho = pd.read_csv(folder / "capability_flip.csv").set_index("capability")
        models = pd.read_csv(folder / "model_flip_rates.csv")
        theta_file, fit = folder / "correct" / "theta.csv", odi_fit(folder, "correct")
        if theta_file.is_file():  # theta comes from a posterior: its fit's verdict goes with it
            models = models.merge(pd.read_csv(theta_file)[["model", "theta_mean"]], on="model", how="left")
            models = models.assign(**fit.columns())
        panels = [("accuracy", "accuracy", "accuracy")] + (
            [("theta_mean", "theta_correct", "ability theta (correct outcome)")] if "theta_mean" in models else [])
        fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False,
                                 layout="constrained")
        for ax, (column, key, label) in zip(axes[0], panels, strict=True):
            ax.scatter(models[column], models["flip_rate"], s=40, zorder=3)
            ax.margins(0.15)
            texts = [ax.text(getattr(r, column), r.flip_rate, r.model, fontsize=8) for r in models.itertuples()]
            adjust_text(texts, x=models[column].to_numpy(), y=models["flip_rate"].to_numpy(), ax=ax,
                        arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5})  # no label over another
            if key in rho.index:
                r = rho.loc[key]
                ax.set_title(f"Spearman rho {r['rho']:.2f} [{r['rho_lo']:.2f}, {r['rho_hi']:.2f}], "
                             f"{int(r['n_models'])} models", fontsize=10,
                             color=fit.colour if key == "theta_correct" else "black")
            ax.set_xlabel(label)
            ax.set_ylabel("flip rate (Table 1's mean5)")
        left_out = rho["models_left_out"].dropna().iloc[0] if "models_left_out" in rho and \
            rho["models_left_out"].notna().any() else ""
        theta_fit = f"\ntheta: {fit.label}" if "theta_mean" in models else ""  # the posterior's verdict, in red
        theta_fit += f"\nleft out (no mean5 flip): {left_out}" if left_out else ""
        fig.suptitle("Capability vs order sensitivity" + theta_fit, fontsize=11,  # unless a result
                     color=fit.colour if theta_fit else "black")
        files += render.write_figure(fig, ctx.out, name)
        note = caption_note({"theta (correct outcome)": fit}) if "theta_mean" in models else ""
        files += render.write_table(models, ctx.out, f"{name}_points", note + "Per model: flip rate, accuracy and "
                                    "theta (rhat_max, ess_bulk_min, converged, fit: theta's posterior fit).")
    if not files:
        raise MissingInput("the ODI folders hold no capability_flip.csv (the ODI app writes it with 3+ models)")
    return files
