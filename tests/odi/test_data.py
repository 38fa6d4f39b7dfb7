"""Trials -> indexed, aggregated ODI arrays."""

import numpy as np
import pandas as pd
import pytest

from facet_probe.odi.data import build_odi_data, load_item_facts
from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder


def small_sim(**kw):
    spec = dict(n_models=3, facets=("option_order", "evidence_chunk_order"), items_per_facet=4,
                datasets_per_facet=2, sigma_pi=(0.3, 1.0), seed=1)
    spec.update(kw)
    return simulate(SimSpec(**spec))


def test_every_trial_is_one_observation_and_indices_are_consistent():
    sim = small_sim()
    data = build_odi_data(sim.trials, "correct")
    assert data.n_trials == len(sim.trials) == 3 * 8 * 6
    assert (data.trials == 1).all() and data.successes.sum() == sim.trials["correct"].sum()
    assert data.items[0].count("::") == 2  # facet::dataset::raw id
    assert len(data.cells) == 4 and set(data.facets) == {"option_order", "evidence_chunk_order"}
    # each item's cell belongs to the item's facet
    assert (data.cell_facet[data.item_cell] == data.item_facet).all()
    assert len(data.pair_item) == 8 * 6


def test_repeats_are_aggregated_into_counts_of_the_same_cell():
    sim = small_sim(n_repeats=3)
    data = build_odi_data(sim.trials, "correct")
    assert (data.trials == 3).all() and data.n_trials == len(sim.trials)
    by_cell = sim.trials.groupby(["model", "facet", "item_id", "ordering_idx"])["correct"].sum()
    assert sorted(by_cell.to_numpy().tolist()) == sorted(data.successes.tolist())


def test_dense_grid_matches_the_sparse_observations():
    data = build_odi_data(small_sim().trials, "correct")
    succ, trials = data.dense_counts()
    assert succ[data.obs_model, data.obs_pair].tolist() == data.successes.tolist()
    assert trials.sum() == data.n_trials


def test_positional_weights_follow_the_items_supporting_components(tmp_path):
    sim = small_sim()
    folder = write_run_folder(sim, tmp_path / "run")
    facts = load_item_facts([folder])
    data = build_odi_data(sim.trials, "correct", facts, positional=True)
    np.testing.assert_allclose(data.pair_weights.sum(axis=1), 1.0)
    assert data.item_located().all()
    # without items only option_order can be located (gold letters); the rest has zero weight
    bare = build_odi_data(sim.trials, "correct", {}, positional=True)
    located = pd.Series(bare.item_located(), index=np.asarray(bare.facets)[bare.item_facet])
    assert located["option_order"].all() and not located["evidence_chunk_order"].any()


def test_mixed_manifests_are_refused():
    frame = small_sim().trials.copy()
    frame.at[0, "permutation"] = list(reversed(frame.at[0, "permutation"]))
    with pytest.raises(ValueError, match="mix manifests"):
        build_odi_data(frame, "correct")


def test_bad_input_gives_clear_errors():
    frame = small_sim().trials
    with pytest.raises(ValueError, match="lack column"):
        build_odi_data(frame.drop(columns="ordering_idx"), "correct")
    with pytest.raises(ValueError, match="not in the trials"):
        build_odi_data(frame, "correct", facets=["few_shot_order"])
    only = build_odi_data(frame, "correct", facets=["option_order"])
    assert only.facets == ("option_order",)


def test_an_unbalanced_panel_is_warned_about_and_the_treatment_stated(caplog):
    """A model that answered other items than the rest can be ranked against accuracy: say so, and how the fit
    treats it (issue 30, point 3)."""
    sim = small_sim()
    balanced = build_odi_data(sim.trials, "correct")
    assert balanced.summary()["panel_coverage"] == 1.0 and "unbalanced" not in caplog.text
    items = sorted(sim.trials["item_id"].unique())
    partial = sim.trials[~((sim.trials["model"] == sim.trials["model"].max()) & sim.trials["item_id"].isin(items[:3]))]
    with caplog.at_level("WARNING", logger="facet_probe.odi.data"):
        data = build_odi_data(partial, "correct")
    summary = data.summary()
    assert summary["panel_coverage"] < 1.0
    assert summary["panel_items_per_model"] == {sim.trials["model"].max(): len(items) - 3}
    assert "missing at random" in summary["panel_treatment"]
    assert "correct: unbalanced panel" in caplog.text and "missing at random" in caplog.text  # which outcome's


def test_equal_permutations_agree_whether_their_lists_are_shared_or_not():
    frame = small_sim().trials.copy()
    frame["permutation"] = [list(p) for p in frame["permutation"]]  # every trial its own list, as a JSONL parse gives
    build_odi_data(frame, "correct")
    shared = {}
    frame["permutation"] = [shared.setdefault(tuple(p), list(p)) for p in frame["permutation"]]  # as a copy gives
    build_odi_data(frame, "correct")
    frame.at[0, "permutation"] = list(reversed(frame.at[0, "permutation"]))  # one trial's own, other, list
    with pytest.raises(ValueError, match="mix manifests"):
        build_odi_data(frame, "correct")


def test_one_item_id_under_two_datasets_of_a_facet_is_refused():
    """An ODI item is facet::item_id; two datasets sharing an id would become one item of one cell (issue 60.2)."""
    frame = small_sim().trials
    one_item = frame[frame["item_id"] == frame["item_id"].iloc[0]]
    with pytest.raises(ValueError, match="several datasets"):
        build_odi_data(pd.concat([frame, one_item.assign(dataset="another")], ignore_index=True), "correct")
