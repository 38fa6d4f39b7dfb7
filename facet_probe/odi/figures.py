"""PNG figures of an ODI fit: theta with intervals, and the per-facet decomposition (sigma_pi vs |delta|)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from facet_probe.odi.convergence import Convergence  # noqa: E402
from facet_probe.store.atomic import atomic_path  # noqa: E402


def fit_title(fig, title: str, fit: Convergence | None) -> None:
    """The figure's title with the fit's convergence label under it, in red unless converged (and not smoke)."""
    if fit is None:
        fig.suptitle(title)
        return
    fig.suptitle(f"{title}\n{fit.label}", color=fit.colour)


def theta_figure(theta: pd.DataFrame, path: Path, title: str = "", fit: Convergence | None = None) -> Path:
    """Horizontal 95% intervals of theta per model, best model on top; the fit's convergence under the title."""
    table = theta.sort_values("theta_mean")
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(table) + 1.2))
    ax.errorbar(table["theta_mean"], range(len(table)),
                xerr=[table["theta_mean"] - table["theta_q2.5"], table["theta_q97.5"] - table["theta_mean"]],
                fmt="o", capsize=2)
    ax.set_yticks(range(len(table)), table["model"])
    ax.set_xlabel("theta (ability, 95% interval)")
    fit_title(fig, title or "Model ability", fit)
    return _save(fig, path)


def decomposition_figure(decomposition: pd.DataFrame, items: pd.DataFrame, path: Path, title: str = "",
                         fit: Convergence | None = None) -> Path:
    """Left: per-item sigma_pi (posterior means) by facet; right: mean |delta| with its folded interval; the fit's
    convergence under the title."""
    facets = list(decomposition["facet"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.45 * len(facets) + 2), sharey=True)
    groups = [items.loc[items["facet"] == f, "sigma_pi_mean"] for f in facets]
    left.boxplot(groups, orientation="horizontal", showfliers=False)
    left.set_yticks(range(1, len(facets) + 1), facets)
    left.set_xlabel("sigma_pi per item (order noise)")
    d = decomposition
    right.errorbar(d["mean_abs_delta"], range(1, len(facets) + 1),
                   xerr=[d["mean_abs_delta"] - d["abs_delta_lo"], d["abs_delta_hi"] - d["mean_abs_delta"]],
                   fmt="o", capsize=3)
    right.axvline(0, color="grey", lw=0.8)
    right.set_xlabel("mean |delta| (systematic bias, folded 95% band)")
    fit_title(fig, title or "Order decomposition per facet", fit)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight")  # a long title (the fit's label) is kept whole
    finally:
        plt.close(fig)
    return path
