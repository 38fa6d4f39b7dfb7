"""Mitigation policies P1-P6, the K ablation, the flip detector and the Pareto front on hand-computed toys."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facet_probe.paper import pareto, policies

GOLD = {"a": "A", "b": "B", "c": "D", "d": "A"}
ANSWERS = {"a": ["A", "A", "A"], "b": ["A", "B", "B"], "c": ["C", "D", None], "d": ["A", "A", "B"]}


def toy_trials(items=("a", "b", "c")) -> pd.DataFrame:
    rows = []
    for item in items:
        for j, answer in enumerate(ANSWERS[item]):
            rows.append({"model": "m", "facet": "option_order", "dataset": "toy", "item_id": item,
                         "ordering_idx": j, "repeat_idx": 0, "answer_normalized": answer,
                         "parse_status": "ok" if answer else "parse_error",
                         "correct": answer == GOLD[item], "usage": {"input_tokens": 10, "output_tokens": 2}})
    # a repeat of ordering 0 that must not count (policies read repeat 0 only)
    rows.append({**rows[0], "repeat_idx": 1, "answer_normalized": "Z", "correct": False})
    return pd.DataFrame(rows)


def item_table(items=("a", "b", "c")) -> pd.DataFrame:
    grids = policies.cell_grids(toy_trials(items))
    return pd.concat([policies.item_policies(g) for g in grids.values()], ignore_index=True)


def test_each_policy_matches_the_hand_computed_accuracy_and_cost():
    table = policies.policy_table(item_table()).set_index("policy")
    expected = {"P1": 2 / 3, "P2": 1.0, "P3": 2 / 3, "P4": 2 / 3, "P5": 1 / 3, "P6": 1.0}
    assert table["accuracy"].to_dict() == pytest.approx(expected)
    assert table.loc["P2", "coverage"] == pytest.approx(1 / 3)  # only item a's first two answers agree
    assert table.loc["P2", "all_items_accuracy"] == pytest.approx(1 / 3)  # abstentions counted wrong
    assert table.loc["P2", "delta_vs_p1"] == pytest.approx(1 - 2 / 3)
    assert table["calls_per_item"].to_dict() == {"P1": 1, "P2": 2, "P3": 3, "P4": 6, "P5": 6, "P6": 6}
    assert table.loc["P2", "tokens_per_item"] == pytest.approx(24.0)  # 2 calls x (10 + 2) tokens


def test_a_majority_tie_goes_to_the_earliest_ordering_and_a_parse_error_never_wins():
    answers = np.array([[0, 1, -1], [-1, -1, 2], [-1, -1, -1]])
    correct = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    assert policies.majority(answers, correct).tolist() == [0.0, 1.0, 0.0]


def test_k_ablation_and_the_k2_detector_of_k3_flips():
    items = item_table(("a", "b", "c", "d"))
    abl = policies.k_ablation(items).set_index("k")
    assert abl.loc[2, "n_flipped"] == 2 and abl.loc[3, "n_flipped"] == 3  # d flips only at its third ordering
    assert abl.loc[2, "recall_of_full_k"] == pytest.approx(2 / 3)
    det = policies.detector_table(items, ks=(2,)).iloc[0]
    assert (det["precision"], det["recall"]) == pytest.approx((1.0, 2 / 3))
    assert det["f1"] == pytest.approx(0.8) and det["auc"] == pytest.approx(5 / 6)


def test_an_item_missing_an_ordering_is_left_out_of_the_grid():
    trials = toy_trials()
    trials = trials[~((trials["item_id"] == "b") & (trials["ordering_idx"] == 2))]
    grid = next(iter(policies.cell_grids(trials).values()))
    assert grid.keys["item_id"].tolist() == ["a", "c"]


def test_the_pareto_front_keeps_only_undominated_points():
    points = pd.DataFrame({"cost": [1, 2, 3, 6, 6, 4], "acc": [0.6, 0.7, 0.65, 0.7, 0.9, np.nan]})
    assert pareto.pareto_front(points, "cost", "acc").tolist() == [True, True, False, False, True, False]
    flips = pd.DataFrame({"cost": [1, 2], "flip": [0.3, 0.3]})
    assert pareto.pareto_front(flips, "cost", "flip", higher_is_better=False).tolist() == [True, False]


def test_a_paired_setting_difference_and_its_interval_on_the_same_items():
    from facet_probe.paper.paired import paired_cells

    base = {"i1": (1, 1), "i2": (0, 1), "i3": (0, 0), "i4": (1, 0)}  # item: (flip, correct)
    cot = {"i1": (0, 1), "i2": (0, 1), "i3": (0, 1), "i5": (1, 1)}  # i4 / i5 answered under one setting only
    rows = [{"model": "m", "facet": "option_order", "dataset": "d", "item_id": i, "flip": f, "accuracy": a,
             "setting": s} for s, items in ((False, base), (True, cot)) for i, (f, a) in items.items()]
    row = paired_cells(pd.DataFrame(rows), baseline=False, other=True, n_boot=300).iloc[0]
    assert row["n_items"] == 3
    assert row["flip_baseline"] == pytest.approx(1 / 3) and row["flip_other"] == 0.0
    assert row["flip_difference"] == pytest.approx(-1 / 3) and row["accuracy_difference"] == pytest.approx(1 / 3)
    assert row["flip_difference_lo"] <= -1 / 3 <= row["flip_difference_hi"] <= 0.0
