"""PNG figures of an ODI fit: theta with intervals, and the per-facet decomposition (sigma_pi vs |delta|)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from facet_probe.atomic import atomic_path  # noqa: E402


def theta_figure(theta: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Horizontal 95% intervals of theta per model, best model on top."""
    table = theta.sort_values("theta_mean")
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(table) + 1.2))
    ax.errorbar(table["theta_mean"], range(len(table)),
                xerr=[table["theta_mean"] - table["theta_q2.5"], table["theta_q97.5"] - table["theta_mean"]],
                fmt="o", capsize=2)
    ax.set_yticks(range(len(table)), table["model"])
    ax.set_xlabel("theta (ability, 95% interval)")
    ax.set_title(title or "Model ability")
    return _save(fig, path)


def decomposition_figure(decomposition: pd.DataFrame, items: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Left: per-item sigma_pi (posterior means) by facet; right: mean |delta| with its folded interval."""
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
    fig.suptitle(title or "Order decomposition per facet")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=120)
    finally:
        plt.close(fig)
    return path
