"""The report's line on what the runs' calls cost: every folder's `cost.json`, summed per model."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from facet_probe.core.untrusted import markdown_text
from facet_probe.runners.cost.ledger import COST_FILE, model_spend, read_cost_file


def spend_line(folders: Iterable[Path]) -> str | None:
    """The report's line on what the runs' calls cost (their `cost.json`, summed per model over the folders), in
    Markdown (model and folder names shown as written: `core.untrusted`); None where no folder recorded a paid call."""
    folders = list(dict.fromkeys(folders))
    per_model: dict[str, float] = {}
    stopped = []
    for folder in folders:
        for model, usd in model_spend(folder).items():
            per_model[model] = per_model.get(model, 0.0) + usd
        if (stop := read_cost_file(folder / COST_FILE).get("stopped_by_budget")) is not None:
            stopped.append(markdown_text(f"{stop['model']} in {folder.name}"))
    if not per_model:
        return None
    models = ", ".join(f"{markdown_text(m)} ${usd:.4f}" for m, usd in sorted(per_model.items()))
    where = f" over {len(folders)} run folders" if len(folders) > 1 else ""
    return (f"**API spend** (`cost.json`: every paid call of every session, failed calls and the judge's "
            f"included): ${sum(per_model.values()):.4f}{where}; per model: {models}."
            + (f" The budget stopped {', '.join(stopped)} in its latest session." if stopped else ""))
