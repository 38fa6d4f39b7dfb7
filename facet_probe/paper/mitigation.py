"""`table-prompt-mitigation`: a prompt mitigation (`prompt.mitigation=<name>`) against the baseline on the same
items, per cell (flip and accuracy under each, the difference with a paired item-bootstrap interval), each cell
marked text or visual, and the unweighted means over the text and the visual cells."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from facet_probe.paper.paired import COMPARED, paired_cells

BASELINE = "none"  # the setting of the runs without `prompt.mitigation`
TEXT, VISUAL = "text", "visual"


def record_modality(record: dict) -> str:
    """`visual` when an item record (items.jsonl) shows an image (a component's or a fixed part's), else `text`."""
    parts = [*(record.get("components") or ()), *(record.get("fixed") or ())]
    return VISUAL if any(p.get("image") for p in parts) else TEXT


def dataset_modalities(folders: list[Path]) -> dict[str, str]:
    """Dataset -> `visual` if any of its items in the runs' items.jsonl shows an image, else `text`."""
    out: dict[str, str] = {}
    for folder in folders:
        path = folder / "items.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    if out.get(rec["dataset"]) != VISUAL:
                        out[rec["dataset"]] = record_modality(rec)
    return out


def mitigation_cells(items: pd.DataFrame, modalities: dict[str, str], n_boot: int = 1000,
                     seed: int = 0) -> pd.DataFrame:
    """Per mitigation and cell it shares with the baseline: `paired_cells` (baseline = the runs without one)
    and the cell's modality."""
    frames = [paired_cells(items, BASELINE, name, n_boot=n_boot, seed=seed)
              for name in sorted(set(items["setting"]) - {BASELINE})]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if table.empty:
        return table
    table.insert(3, "modality", table["dataset"].map(modalities).fillna(TEXT))
    table = table.rename(columns={"other": "mitigation"})
    return table.rename(columns=lambda c: c.replace("_other", "_mitigation"))


def modality_means(cells: pd.DataFrame) -> pd.DataFrame:
    """Per mitigation and modality (text, visual, all): the unweighted mean over cells of each metric under
    the baseline and the mitigation and of their difference, with the number of cells."""
    values = [f"{m}_{s}" for m in COMPARED for s in ("baseline", "mitigation", "difference")]
    both = pd.concat([cells, cells.assign(modality="all")], ignore_index=True)
    means = both.groupby(["mitigation", "modality"], sort=True)[values].mean()
    means.insert(0, "n_cells", both.groupby(["mitigation", "modality"], sort=True).size())
    return means.reset_index()
