"""`fig-think-budget`: flip rate (and accuracy) against the thinking budget, one run folder per budget
(`experiment=think_budget_<family>`), per cell, with the paper's sweep beside ours where model and cell match.

A run's budget is read from what its runner recorded it sent (`run_status.json`, each model's fingerprint):
Gemini's `thinking_budget`, Claude's `budget_tokens` (tokens), or Qwen3.5's thinking switch (on / off)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facet_probe.metrics.flips import CELL_KEYS, bootstrap_means, cell_rng, item_interval
from facet_probe.paper import inputs, published, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput, folder_items, one_run_per_cell
from facet_probe.store.run_folder import RunFolder

#: Fingerprint keys that hold a thinking budget in tokens (Gemini thinking_config, Claude thinking).
BUDGET_KEYS = ("thinking_budget", "budget_tokens")
#: Fingerprint keys that hold a thinking switch (Qwen3.5's chat-template enable_thinking, the HF/vLLM runners).
SWITCH_KEYS = ("enable_thinking", "thinking")


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out |= _leaves(value, f"{prefix}{key}.")
        return out
    return {prefix[:-1]: node}


def budget_of(fingerprint: Mapping) -> tuple[str, float]:
    """(label, tokens) of a model's thinking setting: ('8k', 8192) for a budget, ('on', inf) / ('off', 0)
    for a switch, ('default', nan) when the fingerprint records neither."""
    leaves = _leaves(fingerprint)
    for key, value in leaves.items():
        if key.rsplit(".", 1)[-1] in BUDGET_KEYS and isinstance(value, int | float) and not isinstance(value, bool):
            tokens = int(value)
            return (f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)), float(tokens)
    for key, value in leaves.items():
        if key.rsplit(".", 1)[-1] in SWITCH_KEYS and isinstance(value, bool):
            return ("on", float("inf")) if value else ("off", 0.0)
    return "default", float("nan")


def run_budgets(folder: Path) -> dict[str, tuple[str, float]]:
    """Model name -> its (label, tokens) in a run folder (from run_status.json)."""
    return {name: budget_of(m.fingerprint) for name, m in RunFolder(folder).status().models.items()}


def budget_items(folders: list[Path]) -> pd.DataFrame:
    """Every run's per-item metrics with its model's budget (`budget`, `budget_tokens`); one run per cell
    and budget."""
    frames = []
    for folder in folders:
        items, budgets = folder_items(folder), run_budgets(folder)
        pairs = [budgets.get(m, ("default", float("nan"))) for m in items["model"]]
        frames.append(items.assign(budget=[p[0] for p in pairs], budget_tokens=[p[1] for p in pairs]))
    return one_run_per_cell(pd.concat(frames, ignore_index=True), by=("budget",))


def budget_table(items: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per cell and budget: n items, flip and accuracy with the one interval rule."""
    rows = []
    for key, g in items.groupby([*CELL_KEYS, "budget"], sort=True):
        values = g[["flip", "accuracy"]].to_numpy(float)
        lo, hi = item_interval(values, bootstrap_means(values, n_boot, cell_rng(seed, key)))
        rows.append({**dict(zip([*CELL_KEYS, "budget"], key, strict=True)),
                     "budget_tokens": float(g["budget_tokens"].iloc[0]), "n_items": len(g),
                     "flip": float(np.nanmean(values[:, 0])), "flip_lo": float(lo[0]), "flip_hi": float(hi[0]),
                     "accuracy": float(np.nanmean(values[:, 1])), "accuracy_lo": float(lo[1]),
                     "accuracy_hi": float(hi[1])})
    return pd.DataFrame(rows).sort_values([*CELL_KEYS, "budget_tokens"], kind="stable").reset_index(drop=True)


def with_paper(table: pd.DataFrame, paper: pd.DataFrame, names: pd.DataFrame) -> pd.DataFrame:
    """The paper's sweep (published/think_budget_sweep.csv) beside ours where model config, facet, dataset and
    budget match, with our minus the paper's flip."""
    paper = paper.merge(names[["paper_model", "config"]], left_on="model", right_on="paper_model")
    paper = paper.rename(columns={"config": "model_config", "dataset_id": "paper_dataset"})[
        ["model_config", "facet", "paper_dataset", "thinking_budget_tokens", "regime", "flip_rate", "accuracy"]]
    paper = paper.rename(columns={"model_config": "model", "paper_dataset": "dataset",
                                  "thinking_budget_tokens": "budget_tokens", "flip_rate": "paper_flip",
                                  "accuracy": "paper_accuracy", "regime": "paper_regime"})
    paper["budget_tokens"] = paper["budget_tokens"].astype(float)
    out = table.merge(paper, on=["model", "facet", "dataset", "budget_tokens"], how="left")
    out["paper_difference"] = out["flip"] - out["paper_flip"]
    return out


def fig_think_budget(ctx: Inputs) -> list[Path]:
    """Flip rate vs thinking budget per cell (a line per model, intervals), one run folder per budget; the
    paper's sweep beside ours where model, cell and budget match."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = budget_items(inputs.run_folders(ctx.paths))
    if items["budget"].nunique() < 2:
        raise MissingInput("fig-think-budget needs runs of one cell at two or more thinking budgets "
                           "(python -m facet_probe -m experiment=think_budget_gemini|think_budget_claude|"
                           "think_budget_qwen)")
    table = with_paper(budget_table(items, ctx.n_boot, ctx.seed), published.read("think_budget_sweep.csv"),
                          published.model_names())
    cells = list(table.groupby(["facet", "dataset"], sort=True))
    fig, axes = plt.subplots(1, len(cells), figsize=(4.6 * len(cells), 3.8), squeeze=False)
    for ax, ((facet, dataset), g) in zip(axes[0], cells, strict=True):
        order = sorted(set(g["budget"]), key=lambda b: g.loc[g["budget"] == b, "budget_tokens"].iloc[0])
        for model, m in g.groupby("model", sort=True):
            m = m.set_index("budget").reindex([b for b in order if b in set(m["budget"])])
            x = [order.index(b) for b in m.index]
            err = np.vstack([m["flip"] - m["flip_lo"], m["flip_hi"] - m["flip"]]).clip(min=0)
            ax.errorbar(x, m["flip"], yerr=err, marker="o", capsize=3, label=model)
            if m["paper_flip"].notna().any():
                ax.plot(x, m["paper_flip"], "x--", color="gray", label=f"{model} (paper)")
        regime = g["paper_regime"].dropna()
        ax.set_title(f"{facet.replace('_', ' ')} / {dataset}" + (f" ({regime.iloc[0]})" if len(regime) else ""),
                     fontsize=10)
        ax.set_xticks(range(len(order)), order)
        ax.set_xlabel("thinking budget")
        ax.set_ylabel("K=6 flip rate (95% CI)")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7)
    fig.suptitle("Order sensitivity vs thinking budget", fontsize=11)
    files = render.write_figure(fig, ctx.out, "fig_think_budget")
    caption = ("Flip rate and accuracy per cell and thinking budget (one run folder per budget; the budget as the "
               "runner recorded it sent: Gemini thinking_budget, Claude budget_tokens, Qwen3.5 thinking on/off); "
               "95% item-bootstrap intervals; the paper's sweep (its Gemini models on MedXpertQA and MMLU-Pro) "
               "beside ours where model, cell and budget match.")
    files += render.write_table(table, ctx.out, "fig_think_budget_points", caption)
    return files
