"""Simulated trials with a known truth, for recovery checks, the null check and the benchmark.

The generator follows the ODI likelihood: y ~ Bernoulli(logistic(alpha_i * (theta_m - beta_i - bias -
gamma_ik))), where `bias` is either a position effect of the gold / supporting component (positional
truth) or a per facet-dataset-ordering-index effect (paper truth), or zero (the null). It emits a trial
frame shaped like `load_trial_frame` output plus the `ItemFacts` a run folder's items.jsonl would give.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from facet_probe.core.permutations import ENUMERATE_UP_TO, max_k, sample_permutations
from facet_probe.facets import MAIN_FACETS
from facet_probe.odi.positions import OPTION_FACET, ItemFacts, located_slots, position_weights
from facet_probe.store.atomic import atomic_path, atomic_write_text
from facet_probe.store.run_folder import RunFolder


@dataclass(frozen=True)
class SimSpec:
    """Sizes and true parameters of one simulated panel (defaults: the benchmark's 108k trials)."""

    n_models: int = 18
    facets: tuple[str, ...] = MAIN_FACETS
    datasets_per_facet: int = 2
    items_per_facet: int = 200
    n_orderings: int = 6
    n_repeats: int = 1
    n_components: int = 4
    sigma_pi: tuple[float, ...] = (0.25, 0.45, 0.7, 1.0, 1.4)  # median order noise per facet
    tau_log_sigma: float = 0.1
    #: signed (first, middle, last) bias per facet on the difficulty scale; empty = no positional bias
    position_bias: tuple[tuple[float, float, float], ...] = ()
    ordering_bias_sd: float = 0.0  # paper-style delta[f, d, k] ~ N(0, sd); 0 = none
    theta_sd: float = 1.0
    seed: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.sigma_pi) < len(self.facets):
            raise ValueError(f"sigma_pi gives {len(self.sigma_pi)} values for {len(self.facets)} facets")
        if self.position_bias and len(self.position_bias) < len(self.facets):
            raise ValueError(f"position_bias gives {len(self.position_bias)} rows for {len(self.facets)} facets")
        if self.items_per_facet % self.datasets_per_facet:
            raise ValueError("items_per_facet must split evenly over datasets_per_facet")
        if (most := max_k(self.n_components)) is not None and self.n_orderings > most:  # before any item is drawn
            raise ValueError(f"n_orderings={self.n_orderings:,}: {self.n_components} components have {most:,} "
                             f"distinct orderings (n!); give n_orderings <= {most:,} (up to {ENUMERATE_UP_TO} "
                             "components the orderings repeat, as the audit's)")


@dataclass(frozen=True)
class Simulation:
    """The trial frame, the items' facts, and the truth (keyed the way `OdiData` names things)."""

    trials: pd.DataFrame
    facts: dict[str, ItemFacts]
    truth: dict


def _item_layout(spec: SimSpec, rng: np.random.Generator):
    """Per item: facet, dataset, item_id, permutations (K) and facts."""
    rows, facts = [], {}
    per_dataset = spec.items_per_facet // spec.datasets_per_facet
    n = spec.n_components
    for facet in spec.facets:
        for d in range(spec.datasets_per_facet):
            dataset = f"{facet}_d{d}"
            for j in range(per_dataset):
                item_id = f"{dataset}::{j}"
                perms = sample_permutations(n, spec.n_orderings, seed=spec.seed, item_id=item_id)
                if facet == OPTION_FACET:
                    fact = ItemFacts(gold_index=int(rng.integers(n)))
                else:
                    ids = tuple(f"c{c}" for c in range(n))
                    n_sup = 1 if rng.random() < 0.7 else 2
                    fact = ItemFacts(supporting=frozenset(rng.choice(ids, n_sup, replace=False).tolist()),
                                     component_ids=ids)
                facts[item_id] = fact
                rows.append((facet, dataset, item_id, perms))
    return rows, facts


def simulate(spec: SimSpec) -> Simulation:
    """Draw one panel of trials from the ODI likelihood with the spec's truth."""
    rng = np.random.default_rng(spec.seed)
    layout, facts = _item_layout(spec, rng)
    n_items, k, m = len(layout), spec.n_orderings, spec.n_models
    facet_of = np.array([spec.facets.index(r[0]) for r in layout])
    cells = sorted({f"{r[0]}::{r[1]}" for r in layout})
    cell_of = np.array([cells.index(f"{r[0]}::{r[1]}") for r in layout])
    theta = rng.normal(0, spec.theta_sd, m)
    theta -= theta.mean()
    mu_beta = rng.normal(0, 0.5, len(cells))
    beta = mu_beta[cell_of] + 0.8 * rng.normal(size=n_items)
    alpha = rng.lognormal(0, 0.3, n_items)
    sigma_pi = np.exp(np.log(np.asarray(spec.sigma_pi))[facet_of] + spec.tau_log_sigma * rng.normal(size=n_items))
    gamma = sigma_pi[:, None] * rng.normal(size=(n_items, k))
    delta_fdk = rng.normal(0, spec.ordering_bias_sd, (len(cells), k)) if spec.ordering_bias_sd else np.zeros(
        (len(cells), k))
    delta_pos = np.asarray(spec.position_bias, dtype=float) if spec.position_bias else np.zeros(
        (len(spec.facets), 3))
    weights = np.zeros((n_items, k, 3))
    for i, (facet, _, item_id, perms) in enumerate(layout):
        letter = string.ascii_uppercase[facts[item_id].gold_index] if facet == OPTION_FACET else None
        for kk, perm in enumerate(perms):
            ids = None if facet == OPTION_FACET else [facts[item_id].component_ids[p] for p in perm]
            weights[i, kk] = position_weights(located_slots(facet, perm, ids, facts[item_id], letter), len(perm))
    bias = delta_fdk[cell_of] + np.einsum("ikp,ip->ik", weights, delta_pos[facet_of])
    offset = beta[:, None] + bias + gamma  # (I, K)
    eta = alpha[None, :, None] * (theta[:, None, None] - offset[None])  # (M, I, K)
    p = 1.0 / (1.0 + np.exp(-eta))
    y = rng.random((spec.n_repeats, *p.shape)) < p[None]
    frame = _trial_frame(spec, layout, facts, y, rng)
    item_keys = [f"{r[0]}::{r[2]}" for r in layout]
    truth = {
        "theta": pd.Series(theta, index=[f"m{j:02d}" for j in range(m)]),
        "items": pd.DataFrame({"beta": beta, "alpha": alpha, "sigma_pi": sigma_pi,
                               "facet": [r[0] for r in layout]}, index=item_keys),
        "sigma_pi_facet": pd.Series(spec.sigma_pi[: len(spec.facets)], index=spec.facets),
        "delta_position": pd.DataFrame(delta_pos, index=spec.facets, columns=["first", "middle", "last"]),
        "delta_ordering": pd.DataFrame(delta_fdk, index=cells),
        "mean_abs_delta_position": pd.Series(np.abs(delta_pos).mean(axis=1), index=spec.facets),
    }
    return Simulation(trials=frame, facts=facts, truth=truth)


def _trial_frame(spec: SimSpec, layout, facts, y: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    """Trial rows (repeat, model, item, ordering) with answers: gold letter when y = 1, else a wrong one."""
    r, m, n_items, k = y.shape
    n = spec.n_components
    letters = np.array(list(string.ascii_uppercase[:n]))
    gold = np.array([facts[row[2]].gold_index if row[0] == OPTION_FACET else 0 for row in layout])
    wrong = (gold[None, None, :, None] + rng.integers(1, n, size=y.shape)) % n
    answer_idx = np.where(y, gold[None, None, :, None], wrong)
    rep, mod, item, order = (a.ravel() for a in np.indices(y.shape))
    perms = np.empty((n_items, k), dtype=object)
    comp_ids = np.empty((n_items, k), dtype=object)
    for i, (facet, _, item_id, item_perms) in enumerate(layout):
        for kk, perm in enumerate(item_perms):
            perms[i, kk] = list(perm)
            comp_ids[i, kk] = [] if facet == OPTION_FACET else [facts[item_id].component_ids[p] for p in perm]
    facet_arr = np.array([row[0] for row in layout])
    return pd.DataFrame({
        "model": np.array([f"m{j:02d}" for j in range(m)])[mod],
        "facet": facet_arr[item],
        "dataset": np.array([row[1] for row in layout])[item],
        "item_id": np.array([row[2] for row in layout])[item],
        "ordering_idx": order, "repeat_idx": rep,
        "permutation": perms[item, order], "component_ids": comp_ids[item, order],
        "answer_normalized": letters[answer_idx.ravel()], "gold_normalized": letters[gold[item]],
        "correct": y.ravel(), "parse_status": "ok", "n_options": n,
    })


def simulated_items(sim: Simulation) -> list:
    """Valid canonical `Item`s matching the simulation's facts (what a run folder's items.jsonl holds)."""
    from facet_probe.core.items import make_item

    items, seen = [], set()
    for facet, dataset, item_id in sim.trials[["facet", "dataset", "item_id"]].drop_duplicates().itertuples(
            index=False):
        if item_id in seen:
            continue
        seen.add(item_id)
        fact = sim.facts[item_id]
        if facet == OPTION_FACET:
            n = int(sim.trials.loc[sim.trials["item_id"] == item_id, "n_options"].iloc[0])
            items.append(make_item(item_id=item_id, dataset=dataset, question="Which option?",
                                   choices=tuple(f"option {c}" for c in range(n)), gold_index=fact.gold_index))
        else:
            comps = [{"id": cid, "kind": "text_chunk", "text": f"chunk {cid}",
                      "metadata": {"supporting": cid in fact.supporting}} for cid in fact.component_ids]
            items.append(make_item(item_id=item_id, dataset=dataset, question="What is it?", components=comps,
                                   answer_type="free", gold_answer="A"))
    return items


def write_run_folder(sim: Simulation, folder) -> Path:
    """A minimal run folder (trials.jsonl + items.jsonl) holding the simulation, for end-to-end checks."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(RunFolder(folder).trials_file()) as tmp:
        sim.trials.to_json(tmp, orient="records", lines=True)
    atomic_write_text(RunFolder(folder).items_file, "".join(item.model_dump_json() + "\n" for item in simulated_items(sim)))
    return folder
