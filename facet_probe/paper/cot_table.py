"""`table-cot-order` (beyond both papers): chain of thought against a direct answer on the same items, per cell
(`paired.paired_cells`)."""

from __future__ import annotations

from pathlib import Path

from facet_probe.paper import inputs, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput
from facet_probe.paper.paired import paired_cells


def table_cot_order(ctx: Inputs) -> list[Path]:
    """CoT x order (beyond both papers): per cell the flip and accuracy with and without CoT on the same items,
    and the difference with a paired item-bootstrap interval."""
    items = inputs.read_items_by_setting(ctx.paths, "prompt.cot")
    if not {True, False} <= set(items["setting"].dropna()):
        raise MissingInput("table-cot-order needs runs with prompt.cot=true and prompt.cot=false of the same cells "
                           "(python -m facet_probe -m prompt.cot=true,false ...)")
    table = paired_cells(items, baseline=False, other=True, n_boot=ctx.n_boot, seed=ctx.seed)
    if table.empty:
        raise MissingInput("the CoT and direct runs share no cell (model, facet, dataset) and item")
    caption = ("Chain of thought against a direct answer on the same items: flip and accuracy per cell under each, "
               "and CoT minus direct with a paired 95% item-bootstrap interval.")
    return render.write_table(table, ctx.out, "table_cot_order", caption)
