"""The paper's published values (package data, `published/SOURCE.md`), lined up with our rows, and `verify`:
our aggregation code (`metrics.paper_tables`) must give the paper's model and panel means from the paper's
own per-cell values."""

from __future__ import annotations

from importlib.resources import files

import pandas as pd

from facet_probe.facets import MAIN_FACETS
from facet_probe.metrics import paper_tables

#: The release's column for a facet when it differs from the facet's name.
RELEASE_FACET = {"image_set_order": "image_set_order_screened"}
TOLERANCE = 5e-4  # the release rounds nothing; this only absorbs float summation order


def read(name: str) -> pd.DataFrame:
    """One published table by file name."""
    with files("facet_probe.paper").joinpath("published", name).open() as fh:
        return pd.read_csv(fh)


def model_names() -> pd.DataFrame:
    """paper_model, display and our config name per model of the paper's panel."""
    return read("models.csv")


def table1() -> pd.DataFrame:
    """The paper's Table 1 as (model = our config name, facet, flip), `mean5` included."""
    wide = read("per_facet_per_model.csv").merge(model_names(), left_on="model", right_on="paper_model")
    facets = {RELEASE_FACET.get(f, f): f for f in MAIN_FACETS} | {"mean5": "mean5"}
    long = wide.melt(id_vars=["config"], value_vars=list(facets), var_name="facet", value_name="paper_flip")
    return long.assign(facet=long["facet"].map(facets)).rename(columns={"config": "model"})


def release_cells() -> pd.DataFrame:
    """The finest cells the release gives, as (model, facet, dataset, any_flip): per-dataset cells for the image
    set (screened) and mixed modality (sem-flip), the model-level value for the three text facets."""
    names = model_names().set_index("paper_model")["config"]
    image = read("image_set_screened_rates.csv").rename(columns={"k6_flip_rate": "any_flip"})
    mixed = read("mixed_modality_cells.csv").rename(columns={"sem_flip": "any_flip"})
    text = table1()
    text = text[text["facet"].isin(["option_order", "evidence_chunk_order", "document_rank_order"])]
    cells = pd.concat([
        image.assign(facet="image_set_order", model=image["model"].map(names)),
        mixed.assign(facet="mixed_modality_order", model=mixed["model"].map(names)),
        text.rename(columns={"paper_flip": "any_flip"}).assign(dataset="(model level in the release)"),
    ], ignore_index=True)
    return cells[["model", "facet", "dataset", "any_flip"]]


def verify(cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each published model x facet value, model mean5 and panel mean against what `metrics.paper_tables`
    computes from the release's cells (or the `cells` given): columns check, published, ours, difference, ok."""
    tables = paper_tables(release_cells() if cells is None else cells, metrics=["any_flip"])
    published = table1()
    ours = pd.concat([
        tables.facet_model[["model", "facet", "any_flip"]],
        tables.model_main[["model", "any_flip"]].assign(facet="mean5"),
    ])
    rows = published.merge(ours, on=["model", "facet"], how="left")
    checks = pd.DataFrame({"check": "table1 " + rows["model"] + " " + rows["facet"],
                           "published": rows["paper_flip"], "ours": rows["any_flip"]})
    panel = read("panel_means.csv")
    ours_panel = tables.panel.set_index("facet")["any_flip"].rename({"main": "mean5"})
    panel_checks = pd.DataFrame({"check": "panel mean " + panel["facet"], "published": panel["flip_rate"],
                                 "ours": panel["facet"].map(lambda f: ours_panel.get(
                                     {v: k for k, v in RELEASE_FACET.items()}.get(f, f)))})
    out = pd.concat([checks, panel_checks], ignore_index=True)
    out["difference"] = out["ours"] - out["published"]
    out["ok"] = out["difference"].abs() <= TOLERANCE
    return out
