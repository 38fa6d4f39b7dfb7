"""The paper's published values (package data, `published/SOURCE.md`), lined up with our rows, and `verify`:
our aggregation code (`metrics.flips.paper_tables`) must give the paper's model and panel means from the paper's
own per-cell values."""

from __future__ import annotations

import json
from importlib.resources import files

import numpy as np
import pandas as pd

from facet_probe.datasets.reference_ids import artifact_ids, spec_for
from facet_probe.facets import MAIN_FACETS
from facet_probe.metrics.flips import CELL_KEYS, paper_tables
from facet_probe.paper.policies import papers_quantity

#: The release's column for a facet when it differs from the facet's name.
RELEASE_FACET = {"image_set_order": "image_set_order_screened"}
TOLERANCE = 5e-4  # the release rounds nothing; this only absorbs float summation order
#: Table 4 per cell (`mitigation_screened_values.json`): each policy's accuracy column in the release.
RELEASE_POLICY = {"P1": "P1_acc", "P2": "P2_selective_acc", "P3": "P3_acc", "P4": "P4_K6_majority_acc",
                  "P5": "P5_worst_case_acc", "P6": "P6_best_case_acc"}
#: The policies that abstain in the release, and its column of their abstention share (coverage = 1 - it): P2's
#: pairs and P3's triples without a strict majority, averaged over every pair / triple (`policies.Subsets.all`).
RELEASE_ABSTENTION = {"P2": "P2_disagree_rate", "P3": "P3_disagree_rate"}
#: Our Table 4 columns the paper's are compared on (`paper_<column>` beside each).
POLICY_COMPARED = ("accuracy", "coverage", "all_items_accuracy")
NO_MATCH = "no matching population"
#: Why a P2 / P3 row read under ours has no paper value beside it.
OTHER_QUANTITY = (f"{NO_MATCH}: not the paper's quantity (mitigation.subsets=first reads orderings 0-1 / 0-2; the "
                  "paper averages over every pair / triple)")


def read(name: str) -> pd.DataFrame:
    """One published table by file name."""
    with files("facet_probe.paper").joinpath("published", name).open() as fh:
        return pd.read_csv(fh)


def model_names() -> pd.DataFrame:
    """paper_model, display and our config name per model of the paper's panel."""
    return read("models.csv")


def our_dataset(facet: str, release_dataset: str) -> str:
    """Our dataset config name for a release dataset of a facet (`assets/reference_ids.csv`; the release's own
    name where we have no such dataset, so it matches none of ours)."""
    spec = spec_for(facet, release_dataset)
    return spec.dataset if spec else release_dataset


def our_dataset_named(release_dataset: str) -> str:
    """Our dataset config name for a release dataset named without its facet (`cta_flip_summary.csv`): the one
    name `assets/reference_ids.csv` gives it under every facet, else the release's own (it then matches none)."""
    names = {a.dataset for a in artifact_ids() if a.artifact_dataset == release_dataset}
    return names.pop() if len(names) == 1 else release_dataset


def policy_cells() -> pd.DataFrame:
    """The paper's Table 4 per cell (its 26 cells: two Gemini models x facet x dataset), long: model (our config),
    facet, dataset (ours), policy and paper_<accuracy | coverage | all_items_accuracy>, defined as ours under the
    paper's rule (`policies.policy_table`, `Subsets.all`: P2's and P3's accuracy over the pairs / triples they
    answer, coverage 1 - the release's disagreement rate, all-items accuracy their product)."""
    with files("facet_probe.paper").joinpath("published", "mitigation_screened_values.json").open() as fh:
        combos = pd.DataFrame(json.load(fh)["combos"])
    names = model_names().set_index("paper_model")["config"]
    keys = pd.DataFrame({"model": combos["model"].map(names), "facet": combos["facet"],
                         "dataset": [our_dataset(f, d) for f, d in zip(combos["facet"], combos["dataset"], strict=True)]})
    rows = []
    for policy, column in RELEASE_POLICY.items():
        coverage = 1 - combos[RELEASE_ABSTENTION[policy]] if policy in RELEASE_ABSTENTION else 1.0
        rows.append(keys.assign(policy=policy, paper_accuracy=combos[column], paper_coverage=coverage,
                                paper_all_items_accuracy=combos[column] * coverage))
    return pd.concat(rows, ignore_index=True)


def beside_policy_cells(cells: pd.DataFrame, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Our Table 4 cells (`policies.policy_table`) with the paper's values and our accuracy minus the paper's
    (`paper_difference`) only where model, facet and dataset are one of the paper's cells and the row is the paper's
    quantity (P2 and P3 only under `mitigation.subsets=all`); `paper_population` says which, or why not."""
    out = cells.merge(policy_cells() if paper is None else paper, on=[*CELL_KEYS, "policy"], how="left")
    same = np.array([papers_quantity(p, s) for p, s in zip(out["policy"], out["subsets"], strict=True)], dtype=bool)
    paper_columns = [f"paper_{c}" for c in POLICY_COMPARED]
    out.loc[~same, paper_columns] = np.nan
    out["paper_difference"] = out["accuracy"] - out["paper_accuracy"]
    out["paper_population"] = np.select(
        [~same, out["paper_accuracy"].notna()], [OTHER_QUANTITY, "the paper's cell (same model, facet, dataset)"],
        f"{NO_MATCH}: the paper has no such model x facet x dataset cell")
    return out


def beside_policy_means(means: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Our policy means over all our cells and, beside them, ours (`<column>_matched`) and the paper's
    (`paper_<column>`) over only the cells both have (`beside_policy_cells` rows), with `paper_difference` of the
    accuracies; where none is shared, "no matching population" and no paper value (the paper's Table 4 means are
    over its own 26 cells, another population)."""
    shared = cells[cells["paper_accuracy"].notna()].groupby("policy", sort=True)
    paper = [f"paper_{c}" for c in POLICY_COMPARED]
    matched = shared[list(POLICY_COMPARED)].mean().add_suffix("_matched").join(shared[paper].mean())
    out = means.merge(matched.assign(n_cells_matched=shared.size()).reset_index(), on="policy", how="left")
    out["n_cells_matched"] = out["n_cells_matched"].fillna(0).astype(int)
    out["paper_difference"] = out["accuracy_matched"] - out["paper_accuracy"]
    n_paper = len(policy_cells().drop_duplicates(CELL_KEYS))
    out["paper_population"] = [
        OTHER_QUANTITY if not papers_quantity(policy, subsets) else
        f"{NO_MATCH}: none of our cells is one of the paper's {n_paper} (model, facet, dataset)" if not k else
        f"the paper's {k} of {n_paper} cells that are ours, and ours over the same cells (*_matched)"
        for policy, subsets, k in zip(out["policy"], out["subsets"], out["n_cells_matched"], strict=True)]
    return out


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
    """Each published model x facet value, model mean5 and panel mean against what `metrics.flips.paper_tables`
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
