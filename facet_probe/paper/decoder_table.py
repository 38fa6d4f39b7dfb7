"""`table-decoder` (Appendix D): the decoder-noise decomposition as `python -m facet_probe.decoder` wrote it (read,
never recomputed), with the paper's values beside where model, facet and temperature match."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from facet_probe.paper import published, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput
from facet_probe.store.run_folder import folders_under

DECODER_FILE = "decoder_decomposition.csv"
DECODER_SHOWN = ("n_items", "d_same", "d_cross", "delta", "order_excess_share", "any_flip", "expected_accuracy",
                 "accuracy_swing", "parse_rate")


def table_decoder(ctx: Inputs) -> list[Path]:
    """Appendix D: the decoder-noise decomposition per model x facet x temperature, as `python -m
    facet_probe.decoder.__main__` computed it (read, never recomputed), with the paper's values beside where they match."""
    from facet_probe.decoder.noise import REFERENCE_NAMES

    found = sorted({folder / DECODER_FILE for path in ctx.paths
                    for folder in folders_under(path, lambda f: (f / DECODER_FILE).is_file())})
    if not found:
        raise MissingInput(f"no {DECODER_FILE} under the inputs: run `python -m facet_probe.decoder "
                           "input=<the temperature grid's sweep folder>` first (docs/decoder_noise.md)")
    ours = pd.concat([pd.read_csv(p).assign(source=str(p.parent)) for p in found], ignore_index=True)
    paper = published.read("decoder_decomp_screened_by_facet.csv")
    names = published.model_names().set_index("paper_model")["config"]
    paper = paper.assign(model=paper["model"].map(names)).dropna(subset=["model"])
    wanted = {ref: ours_name for ours_name, ref in REFERENCE_NAMES.items()}
    paper = paper.rename(columns=wanted)[["model", "facet", "temperature", "d_same", "d_cross", "delta"]]
    table = ours.merge(paper.add_prefix("paper_").rename(columns={
        "paper_model": "model", "paper_facet": "facet", "paper_temperature": "temperature"}),
        on=["model", "facet", "temperature"], how="left")
    shown = table[["model", "facet", "temperature", *(c for c in DECODER_SHOWN if c in table)]]
    caption = ("Decoder-noise decomposition (Appendix D): per model x facet x temperature, datasets pooled; d_same: "
               "answer pairs to one ordering that differ; d_cross: pairs to different orderings; delta = d_cross - "
               "d_same (docs/decoder_noise.md defines every column).")
    return render.write_table(table, ctx.out, "table_decoder", caption, latex=shown)
