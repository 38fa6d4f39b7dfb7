"""`table-prompt-mitigation`: a prompt mitigation (`prompt.mitigation=<name>`) against the baseline on the same
items, per cell (flip and accuracy under each, the difference with a paired item-bootstrap interval), each cell
marked text or visual, and the unweighted means over the text and the visual cells."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from facet_probe.paper import inputs, published, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput
from facet_probe.paper.paired import COMPARED, paired_cells
from facet_probe.paper.published import our_dataset_named
from facet_probe.store.run_folder import RunFolder

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
        for (dataset, _), rec in RunFolder(folder).items().items():
            if out.get(dataset) != VISUAL:
                out[dataset] = record_modality(rec)
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


def with_paper_cta(cells: pd.DataFrame, paper: pd.DataFrame, names: pd.DataFrame) -> pd.DataFrame:
    """The paper's CTA numbers (published/cta_flip_summary.csv: baseline and CTA flip and accuracy per model and
    dataset) beside each of our mitigation cells of the same model config and dataset, with our flip
    difference minus the paper's. The paper's instruction is not ours: the comparison is of effects, not texts."""
    paper = paper.merge(names[["paper_model", "config"]], left_on="model", right_on="paper_model")
    paper = paper[["config", "dataset_id", "baseline_flip_rate", "cta_flip_rate", "delta_abs", "baseline_accuracy",
                   "cta_accuracy"]].rename(columns={
        "config": "model", "dataset_id": "dataset", "baseline_flip_rate": "paper_baseline_flip",
        "cta_flip_rate": "paper_cta_flip", "delta_abs": "paper_flip_difference",
        "baseline_accuracy": "paper_baseline_accuracy", "cta_accuracy": "paper_cta_accuracy"})
    paper["dataset"] = paper["dataset"].map(our_dataset_named)  # the release's "commonsenseqa" is our commonsense_qa
    out = cells.merge(paper, on=["model", "dataset"], how="left")
    out["flip_difference_minus_paper"] = out["flip_difference"] - out["paper_flip_difference"]
    return out


def table_prompt_mitigation(ctx: Inputs) -> list[Path]:
    """Baseline vs each prompt mitigation (`prompt.mitigation=<name>`) on the same items: flip and accuracy
    per cell with paired intervals, text vs visual cells, and the means over each kind of cell."""
    items = inputs.read_items_by_setting(ctx.paths, "prompt.mitigation")
    items["setting"] = items["setting"].map(lambda v: BASELINE if v is None or str(v).lower() in ("", "none", "null")
                                            else str(v))
    if not ({BASELINE} < set(items["setting"])):
        raise MissingInput("table-prompt-mitigation needs runs without and with prompt.mitigation=<name> of the same "
                           "cells (python -m facet_probe -m prompt.mitigation=null,order_invariant ...)")
    cells = mitigation_cells(items, dataset_modalities(inputs.run_folders(ctx.paths)), ctx.n_boot, ctx.seed)
    if cells.empty:
        raise MissingInput("the mitigation and baseline runs share no cell (model, facet, dataset) and item")
    cells = with_paper_cta(cells, published.read("cta_flip_summary.csv"), published.model_names())
    caption = ("A prompt mitigation (an order-invariance instruction of our own added to the system text, "
               "conf/prompt_mitigation/) against no instruction on the same items: per cell the flip and accuracy "
               "under each and mitigation minus baseline with a paired 95% item-bootstrap interval; each cell text "
               "or visual (its items show an image); the paper's CTA baseline and CTA values (its own, unreleased "
               "instruction) beside ours where model and dataset match.")
    files = render.write_table(cells, ctx.out, "table_prompt_mitigation_cells", caption)
    files += render.write_table(modality_means(cells), ctx.out, "table_prompt_mitigation",
                                "Prompt mitigations: unweighted means over the text, the visual and all cells "
                                "(intervals per cell in table_prompt_mitigation_cells).")
    return files
