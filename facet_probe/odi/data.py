"""Trials -> the indexed, aggregated arrays the ODI model reads.

An ODI item is ``facet::item_id`` (item ids already carry the dataset), its cell is
``facet::dataset``. Observations are aggregated to one binomial count per (model, item, ordering
index): repeats of the same call are extra observations of the same y[m, i, k]. The order-noise term
lives on the observed (item, ordering) *pairs*; the positional variant adds, per pair, the weights of
the gold / supporting component over (first, middle, last).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from facet_probe.odi.outcome import ModalRule, outcome_values
from facet_probe.odi.positions import POSITIONS, ItemFacts, facts_from_items, located_slots, position_weights
from facet_probe.store.columnar import per_value
from facet_probe.store.run_folder import RunFolder, read_items

log = logging.getLogger(__name__)

#: How the fit treats a panel whose models answered different items (written beside the warning).
UNBALANCED_TREATMENT = (
    "the fit treats the missing (model, item) cells as missing at random: each model's theta comes from the "
    "items it answered, item difficulty from the models that answered each item, so thetas are comparable only "
    "through the items models share; a model that answered fewer or other items (e.g. only easier or harder "
    "ones) can be ranked above or below one with higher accuracy on its own items. Compare models on one item "
    "set (the same run manifest for every model) or read theta with this caveat")

REQUIRED = ("model", "facet", "dataset", "item_id", "ordering_idx", "answer_normalized")


@dataclass(frozen=True)
class OdiData:
    """Aggregated observations with their index arrays (all int32 / float32, ready for PyMC)."""

    outcome: str
    models: tuple[str, ...]
    facets: tuple[str, ...]
    cells: tuple[str, ...]
    items: tuple[str, ...]
    n_orderings: int
    item_facet: np.ndarray  # (I,) facet of each item
    item_cell: np.ndarray  # (I,) facet-dataset cell of each item
    cell_facet: np.ndarray  # (C,) facet of each cell
    pair_item: np.ndarray  # (G,) item of each observed (item, ordering) pair
    pair_ordering: np.ndarray  # (G,) ordering index of each pair
    obs_model: np.ndarray  # (N,) model of each aggregated observation
    obs_pair: np.ndarray  # (N,) pair of each aggregated observation
    successes: np.ndarray  # (N,) trials with y = 1
    trials: np.ndarray  # (N,) trials
    pair_weights: np.ndarray | None = None  # (G, 3) weights over POSITIONS (positional variant)
    notes: dict = field(default_factory=dict)
    #: how the outcome was built from the trials: its rule and what it dropped (outcome.outcome_values)
    outcome_notes: dict = field(default_factory=dict)

    @property
    def n_trials(self) -> int:
        return int(self.trials.sum())

    @property
    def every_item_has_every_ordering(self) -> bool:
        """True when the pairs are exactly items x orderings (item-major, so a reshape lays them out)."""
        return len(self.pair_item) == len(self.items) * self.n_orderings

    def dense_counts(self, min_fill: float = 0.5) -> tuple[np.ndarray, np.ndarray] | None:
        """(successes, trials) as models x pairs grids (0 trials where unobserved), or None if too sparse."""
        shape = (len(self.models), len(self.pair_item))
        if len(self.trials) < min_fill * shape[0] * shape[1]:
            return None
        succ, trials = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
        succ[self.obs_model, self.obs_pair] = self.successes
        trials[self.obs_model, self.obs_pair] = self.trials
        return succ, trials

    def item_located(self) -> np.ndarray:
        """(I,) True where some ordering of the item has a located gold / supporting component."""
        if self.pair_weights is None:
            return np.zeros(len(self.items), dtype=bool)
        located = self.pair_weights.sum(axis=1) > 0
        return np.bincount(self.pair_item, weights=located, minlength=len(self.items)) > 0

    def summary(self) -> dict:
        """Sizes and drop counts, for `dry_run` and the run folder."""
        facet_items = np.bincount(self.item_facet, minlength=len(self.facets))
        out = {"outcome": self.outcome, "n_trials": self.n_trials, "n_observations": len(self.trials),
               "n_models": len(self.models), "n_items": len(self.items), "n_cells": len(self.cells),
               "n_orderings": self.n_orderings, "n_pairs": len(self.pair_item),
               "mean_y": float(self.successes.sum() / max(self.n_trials, 1)),
               "items_per_facet": {f: int(n) for f, n in zip(self.facets, facet_items, strict=True)}}
        if self.pair_weights is not None:
            located = np.bincount(self.item_facet, weights=self.item_located(), minlength=len(self.facets))
            out["located_items_per_facet"] = {f: int(n) for f, n in zip(self.facets, located, strict=True)}
        return {**out, **self.outcome_notes, **self.notes}


def load_item_facts(inputs, items_path: str | Path | None = None) -> dict[str, ItemFacts]:
    """ItemFacts from `items.jsonl` of each input run folder (and/or an explicit items file)."""
    paths = [Path(items_path)] if items_path else []
    for raw in [inputs] if isinstance(inputs, str | Path) else inputs:
        folder = RunFolder(Path(raw))
        if folder.path.is_dir() and folder.items_file.is_file():
            paths.append(folder.items_file)
    facts: dict[str, ItemFacts] = {}
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: items file not found")
        facts.update(facts_from_items(list(read_items([path]).values())))
    return facts


def check_columns(frame: pd.DataFrame, positional: bool) -> None:
    """Raise with the missing column names when the trials cannot feed the model."""
    need = list(REQUIRED) + (["permutation"] if positional else [])
    missing = [c for c in need if c not in frame]
    if missing:
        raise ValueError(f"trials lack column(s) {missing}; ODI needs {need}")
    if frame.empty:
        raise ValueError("no trials left to model (empty input or every trial filtered out)")


def pair_weight_table(pairs: pd.DataFrame, facts: Mapping[str, ItemFacts]) -> np.ndarray:
    """(G, 3) position weights for each (facet, item_id, ordering) pair, from its first trial."""
    weights = np.zeros((len(pairs), len(POSITIONS)), dtype=np.float32)
    has_ids = "component_ids" in pairs
    has_gold = "gold_normalized" in pairs
    used = [c for c in ("facet", "item_id", "permutation", "component_ids", "gold_normalized") if c in pairs]
    for g, row in enumerate(pairs[used].itertuples(index=False)):  # only these: a trial frame has dozens
        ids = row.component_ids if has_ids and isinstance(row.component_ids, list | tuple | np.ndarray) else None
        slots = located_slots(row.facet, row.permutation, ids, facts.get(row.item_id),
                              row.gold_normalized if has_gold else None)
        n_slots = len(ids) if ids is not None and len(ids) else len(row.permutation)
        if slots:
            weights[g] = position_weights(slots, n_slots)
    return weights


def check_shared_orderings(frame: pd.DataFrame) -> None:
    """Raise when two models saw different permutations for the same (facet, item, ordering index)."""
    # each permutation as text ("2,0,1"), once per distinct list: a columnar copy gives the trials of one
    # permutation one shared list (400k trials, a few thousand lists)
    perms = pd.Series(per_value(frame["permutation"].tolist(), lambda p: ",".join(map(str, p))), index=frame.index)
    distinct = perms.groupby([frame["facet"], frame["item_id"], frame["ordering_idx"]]).nunique()
    bad = distinct[distinct > 1]
    if len(bad):
        facet, item, k = bad.index[0]
        raise ValueError(f"{len(bad)} (facet, item, ordering) rows have different permutations across "
                         f"trials, e.g. {facet} {item} k={k}: the inputs mix manifests (different seed or "
                         "K), so ordering index k does not mean one ordering; model one manifest at a time")


def check_orderings(frame: pd.DataFrame) -> None:
    """Raise when the trials hold one ordering per item (K=1): ODI models how answers vary across orderings."""
    if len(frame) and int(frame["ordering_idx"].max()) < 1:
        raise ValueError("the trials hold one ordering per item (K=1): ODI models how answers vary across orderings "
                         "and K=1 has none; audit with k >= 2 (the paper's k=6) and fit that run")


def check_item_datasets(frame: pd.DataFrame) -> None:
    """Raise when one item id of a facet appears under two datasets (an ODI item is `facet::item_id`)."""
    datasets = frame.groupby(["facet", "item_id"], observed=True)["dataset"].nunique()
    if (datasets > 1).any():
        facet, item = datasets[datasets > 1].index[0]
        raise ValueError(f"{int((datasets > 1).sum())} (facet, item_id) pairs appear under several datasets, e.g. "
                         f"{facet} {item}: ODI keys an item by facet and item id, so give each dataset's items "
                         "their own ids (facet_probe's carry the dataset, `<dataset>::<id>`)")


def build_odi_data(frame: pd.DataFrame, outcome: str, facts: Mapping[str, ItemFacts] | None = None,
                   positional: bool = False, facets: list[str] | None = None,
                   modal_rule: ModalRule = ModalRule.break_ties) -> OdiData:
    """Index and aggregate trials for one outcome (`modal_rule`: how a modal outcome treats ties and trials
    without an answer); positional=True also locates the gold / supporting slot."""
    check_columns(frame, positional)
    check_item_datasets(frame)
    if facets:
        unknown = sorted(set(facets) - set(frame["facet"].unique()))
        if unknown:
            raise ValueError(f"facet(s) {unknown} not in the trials; present: {sorted(frame['facet'].unique())}")
        frame = frame[frame["facet"].isin(facets)]
    check_orderings(frame)
    y, keep, outcome_notes = outcome_values(frame, outcome, modal_rule)
    frame = frame.loc[keep].reset_index(drop=True)
    check_columns(frame, positional)
    if "permutation" in frame:
        check_shared_orderings(frame)
    item_key = frame["facet"].astype(str) + "::" + frame["item_id"].astype(str)
    cell_key = frame["facet"].astype(str) + "::" + frame["dataset"].astype(str)
    m_idx, models = pd.factorize(frame["model"].astype(str), sort=True)
    i_idx, items = pd.factorize(item_key, sort=True)
    k_idx = frame["ordering_idx"].astype(int).to_numpy()
    if (k_idx < 0).any():
        raise ValueError("ordering_idx must be >= 0")
    n_orderings = int(k_idx.max()) + 1
    pair_code = i_idx.astype(np.int64) * n_orderings + k_idx
    g_idx, pair_codes = pd.factorize(pair_code, sort=True)
    first_of_pair = pd.Series(np.arange(len(frame))).groupby(g_idx).first().to_numpy()
    item_cells = pd.Series(cell_key.to_numpy()).groupby(i_idx).first()
    c_idx, cells = pd.factorize(item_cells.to_numpy(), sort=True)
    cell_facets = pd.Series(cells).str.split("::").str[0]
    f_cell, facet_names = pd.factorize(cell_facets, sort=True)
    obs_code = m_idx.astype(np.int64) * len(pair_codes) + g_idx
    o_idx, obs_codes = pd.factorize(obs_code, sort=True)
    notes = panel_coverage(m_idx, i_idx, tuple(models), len(items), outcome)
    weights = None
    if positional:
        pairs = frame.iloc[first_of_pair]
        weights = pair_weight_table(pairs, facts or {})
        notes["unlocated_pairs"] = int((weights.sum(axis=1) == 0).sum())
    return OdiData(
        outcome=outcome, models=tuple(models), facets=tuple(facet_names), cells=tuple(cells),
        items=tuple(items), n_orderings=n_orderings,
        item_facet=f_cell[c_idx].astype(np.int32), item_cell=c_idx.astype(np.int32),
        cell_facet=f_cell.astype(np.int32),
        pair_item=(np.asarray(pair_codes) // n_orderings).astype(np.int32),
        pair_ordering=(np.asarray(pair_codes) % n_orderings).astype(np.int32),
        obs_model=(np.asarray(obs_codes) // len(pair_codes)).astype(np.int32),
        obs_pair=(np.asarray(obs_codes) % len(pair_codes)).astype(np.int32),
        successes=np.bincount(o_idx, weights=y, minlength=len(obs_codes)).astype(np.int32),
        trials=np.bincount(o_idx, minlength=len(obs_codes)).astype(np.int32),
        pair_weights=weights, notes=notes, outcome_notes=outcome_notes)


def panel_coverage(m_idx: np.ndarray, i_idx: np.ndarray, models: tuple[str, ...], n_items: int,
                   outcome: str) -> dict:
    """The models x items coverage of the panel; warns (and says how the fit treats it) when it is not full,
    naming the outcome (a run fits each outcome, so the warning can come once per outcome)."""
    answered = pd.DataFrame({"m": m_idx, "i": i_idx}).drop_duplicates()
    per_model = np.bincount(answered["m"].to_numpy(), minlength=len(models))
    coverage = float(len(answered) / max(len(models) * n_items, 1))
    if coverage >= 1.0:
        return {"panel_coverage": 1.0}
    short = {models[m]: int(n) for m, n in enumerate(per_model) if n < n_items}
    listed = ", ".join(f"{m} {n}" for m, n in list(short.items())[:6]) + (", ..." if len(short) > 6 else "")
    log.warning("%s: unbalanced panel: the models answered different items (models x items coverage %.1f%%; "
                "items answered of %d: %s); %s", outcome, 100 * coverage, n_items, listed, UNBALANCED_TREATMENT)
    return {"panel_coverage": round(coverage, 4), "panel_items_per_model": short,
            "panel_treatment": UNBALANCED_TREATMENT}
