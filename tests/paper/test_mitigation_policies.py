"""Mitigation policies P1-P6, the K ablation, the flip detector and the Pareto front on hand-computed toys; and
(issue 60, points 6-7) the paper's rule for P2, P3 and the K=2/3 detector against the release's per-cell values."""

from __future__ import annotations

import json
from collections import Counter
from importlib.resources import files
from itertools import combinations
from math import comb
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from facet_probe.core.errors import ConfigError
from facet_probe.paper import pareto, policies, published

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


def item_table(items=("a", "b", "c"), subsets=policies.Subsets.first) -> pd.DataFrame:
    """The toy's items under ours (orderings 0-1 / 0-2) unless `subsets` says otherwise."""
    grids = policies.cell_grids(toy_trials(items))
    return pd.concat([policies.item_policies(g, subsets) for g in grids.values()], ignore_index=True)


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


# --- issue 60, points 6-7: the paper's rule (mitigation.subsets=all) against the release ----------------------------


def released() -> pd.DataFrame:
    """The release's 26 Table 4 cells (`mitigation_screened_values.json`), as released."""
    with files("facet_probe.paper").joinpath("published", "mitigation_screened_values.json").open() as fh:
        return pd.DataFrame(json.load(fh)["combos"])


def whole(x: pd.Series) -> pd.Series:
    return pd.Series(np.isclose(x, np.round(x), rtol=0, atol=1e-6), index=x.index)


def test_the_release_averages_p2_over_every_pair_and_p3_over_every_triple():
    cells = released()
    n = cells["n_items"]
    assert len(cells) == 26
    # a share of n items x 15 pairs (of K=6) and of n items x 20 triples in every cell; of n items alone in few
    assert whole(cells["P2_coverage"] * n * 15).all() and whole(cells["P2_coverage"] * n).sum() == 5
    assert whole(cells["P3_disagree_rate"] * n * 20).all() and whole(cells["P3_disagree_rate"] * n).sum() == 7
    # P2's accuracy is not pooled over the answered (item, pair)s (it would be whole x their number) ...
    assert (~whole(cells["P2_selective_acc"] * cells["P2_coverage"] * n * 15)).sum() == 18
    # ... and P3 abstains on a triple without a strict majority: where every triple has one, P3 is a share of the
    # n x 20 triples; where some has none, it is not in 11 of 20 cells (a tie counted wrong or given to an ordering
    # would keep it one)
    has_ties, p3_whole = cells["P3_disagree_rate"] > 0, whole(cells["P3_acc"] * n * 20)
    assert p3_whole[~has_ties].all() and (~p3_whole[has_ties]).sum() == 11 and has_ties.sum() == 20


def reference_vote(answers: np.ndarray, correct: np.ndarray, size: int) -> tuple[float, float]:
    """The release's rule, written out: per item, every `size`-subset of its orderings votes; a strict majority of
    parsed answers answers, else the subset abstains. Accuracy: the mean, over items answering in any subset, of
    right / answered; coverage: the mean answered share."""
    answered, right = [], []
    for row_a, row_c in zip(answers, correct, strict=True):
        votes = []
        for subset in combinations(range(len(row_a)), size):
            counts = Counter(row_a[i] for i in subset if row_a[i] >= 0)
            top, n_top = counts.most_common(1)[0] if counts else (None, 0)
            if 2 * n_top > size:
                votes.append(float(next(row_c[i] for i in subset if row_a[i] == top)))
        answered.append(len(votes) / comb(len(row_a), size))
        right.append(np.mean(votes) if votes else np.nan)
    return float(np.nanmean(right)), float(np.mean(answered))


def grid_of(answers: np.ndarray, correct: np.ndarray) -> policies.CellGrid:
    keys = pd.DataFrame({"model": "m", "facet": "f", "dataset": "d", "item_id": [f"i{i}" for i in range(len(answers))]})
    return policies.CellGrid(keys, answers, correct, np.full(answers.shape, np.nan))


def test_p2_and_p3_under_the_papers_rule_average_every_pair_and_triple():
    rng = np.random.default_rng(7)
    answers = rng.choice([-1, 0, 1, 2], p=[0.1, 0.6, 0.2, 0.1], size=(40, 6))
    answers[:3] = [[0, 1, 2, -1, 1, 0], [-1, -1, -1, -1, -1, 2], [1, 1, 1, 1, 1, 1]]  # a tie, none answered, stable
    correct = (answers == 0).astype(float)
    table = policies.policy_table(policies.item_policies(grid_of(answers, correct), policies.Subsets.all))
    table = table.set_index("policy")
    assert (table["subsets"] == "all").all()
    for policy, size in (("P2", 2), ("P3", 3)):
        accuracy, coverage = reference_vote(answers, correct, size)
        assert table.loc[policy, "accuracy"] == pytest.approx(accuracy, abs=1e-12), policy
        assert table.loc[policy, "coverage"] == pytest.approx(coverage, abs=1e-12), policy
        assert table.loc[policy, "all_items_accuracy"] == pytest.approx(accuracy * coverage, abs=1e-12), policy
        assert table.loc[policy, "calls_per_item"] == size  # one subset is deployed: the average is over which one
    assert table.loc["P3", "coverage"] < 1  # the paper's P3 abstains where three answers all differ
    ours = policies.policy_table(policies.item_policies(grid_of(answers, correct), policies.Subsets.first))
    assert ours.set_index("policy").loc["P3", "coverage"] == 1.0  # ours gives the tie to the earliest ordering


def test_the_apps_default_is_the_papers_rule_and_a_bad_name_is_one_line(tmp_path):
    conf = OmegaConf.load(Path(policies.__file__).parents[1] / "conf" / "paper_app.yaml")
    assert policies.parse_subsets(conf.mitigation.subsets) is policies.Subsets.all
    with pytest.raises(ConfigError, match="mitigation.subsets must be one of all, first; got 'pairs'"):
        policies.parse_subsets("pairs")


def test_the_papers_values_sit_beside_p2_and_p3_only_under_the_papers_rule():
    cell = {"model": "gemini_3_flash", "facet": "option_order", "dataset": "commonsense_qa"}
    for subsets in ("all", "first"):
        ours = pd.DataFrame([{**cell, "policy": p, "accuracy": 0.8, "subsets": subsets} for p in ("P1", "P2", "P3")])
        out = published.beside_policy_cells(ours).set_index("policy")
        assert out.loc["P1", "paper_accuracy"] == pytest.approx(0.8758333, abs=1e-6)
        if subsets == "all":  # the release's P3 abstains on 0.1 % of its triples
            assert out.loc["P3", "paper_coverage"] == pytest.approx(1 - 0.001)
            assert out.loc["P3", "paper_all_items_accuracy"] == pytest.approx(0.8835 * 0.999)
        else:
            assert out.loc[["P2", "P3"], ["paper_accuracy", "paper_coverage", "paper_difference"]].isna().all().all()
            assert out.loc[["P2", "P3"], "paper_population"].str.contains("not the paper's quantity").all()


def test_the_binary_auc_cannot_give_the_released_k2_cells():
    cells = released().dropna(subset=["alpha3_K2_AUC"])
    # no false positive wherever precision is defined, so a 0/1 detector's (TPR + TNR) / 2 is (recall + 1) / 2
    assert (cells["alpha3_K2_precision"].dropna() == 1.0).all()
    binary = (cells["alpha3_K2_recall"] + 1) / 2
    assert (cells["alpha3_K2_AUC"] == 1.0).all() and (binary < 1).sum() == 21
    mantis = cells[cells["dataset"] == "mantis_eval"].iloc[0]
    assert (mantis["alpha3_K2_recall"], mantis["alpha3_K2_AUC"]) == (0.0, 1.0)


#: For each released cell with flipped and stable items, one set of flipped items' answer patterns over the K=6
#: orderings ("411x2": two items answering one letter 4 times and two others once each; the stable items answer
#: one letter 6 times) under which the paper's rule gives every released number of the cell at once: P2 coverage,
#: P3 disagreement and the K=2 and K=3 detectors' precision, recall, F1 and AUC (found by an integer program over
#: the patterns; under (TPR + TNR) / 2 none exists, `test_the_binary_auc_cannot_give_the_released_k2_cells`).
FLIPPED_PATTERNS = {
    "dialog_turn_order/multichallenge/flash": "51x9 42x4 411x18 321x3 222x1 21111x125 111111x34",
    "dialog_turn_order/multichallenge/pro": "51x10 42x10 411x15 33x1 321x1 3111x8 222x11 21111x65 111111x60",
    "dialog_turn_order/musique_synth/flash": "51x12 42x2 411x9 33x11 21111x3",
    "dialog_turn_order/musique_synth/pro": "51x7 42x7 33x6",
    "document_rank_order/hotpotqa/flash": "51x11 42x5 411x2 33x1 321x5 3111x1",
    "document_rank_order/hotpotqa/pro": "51x4 42x8 411x1 33x2 321x1",
    "document_rank_order/multihop_rag/flash": "51x10 42x4 33x3 321x1 3111x2 111111x2",
    "document_rank_order/multihop_rag/pro": "51x5 42x2 411x1 33x2 3111x1 111111x1",
    "evidence_chunk_order/hotpotqa/flash": "51x11 411x8 33x9 3111x2 222x4 2211x4",
    "evidence_chunk_order/hotpotqa/pro": "51x5 42x12 411x3 33x3 3111x1 111111x1",
    "evidence_chunk_order/musique/flash": "51x18 42x12 411x1 321x9 3111x1 2211x1 21111x1",
    "evidence_chunk_order/musique/pro": "51x10 42x11 411x1 33x3 321x1",
    "few_shot_order/gsm8k/flash": "33x1",
    "few_shot_order/humaneval/flash": "51x39 42x12 411x13 33x17 21111x3 111111x1",
    "few_shot_order/humaneval/pro": "51x27 42x10 321x8 222x1 2211x4",
    "image_set_order/mantis_eval/flash": "51x1",
    "image_set_order/medframeqa/flash": "51x23 42x8 411x6 33x16 21111x2",
    "image_set_order/medframeqa/pro": "51x22 42x8 411x5 33x2 321x3",
    "option_order/commonsenseqa/flash": "51x12 42x9 411x1 33x6",
    "option_order/commonsenseqa/pro": "51x8 42x6 33x1",
    "option_order/mmlu_pro/flash": "51x16 411x7 33x14 222x1 21111x1 111111x1",
    "option_order/mmlu_pro/pro": "51x11 42x10 411x3 33x2 222x3 2211x1",
}


def pattern_answers(pattern: str) -> list[int]:
    """"411" -> [0, 0, 0, 0, 1, 2]: the answer codes of one item over its six orderings."""
    return [code for code, times in enumerate(map(int, pattern)) for _ in range(times)]


def test_the_papers_detector_gives_every_released_cell():
    cells = released().dropna(subset=["alpha3_K2_AUC"])
    assert len(cells) == len(FLIPPED_PATTERNS) == 22
    for cell in cells.itertuples():
        key = f"{cell.facet}/{cell.dataset}/{'flash' if 'flash' in cell.model else 'pro'}"
        flipped = [pattern_answers(p) for part in FLIPPED_PATTERNS[key].split()
                   for p, times in [part.split("x")] for _ in range(int(times))]
        assert len(flipped) == round(cell.content_flip_rate_K6 * cell.n_items), key
        answers = np.array(flipped + [[0] * 6] * (cell.n_items - len(flipped)))
        items = policies.item_policies(grid_of(answers, np.zeros(answers.shape)), policies.Subsets.all)
        detector = policies.detector_table(items).set_index("detector_k")
        for j in (2, 3):
            ours = detector.loc[j, ["precision", "recall", "f1", "auc"]].to_numpy(dtype=float)
            paper = np.array([getattr(cell, f"alpha3_K{j}_{m}") for m in ("precision", "recall", "F1", "AUC")],
                             dtype=float)
            np.testing.assert_allclose(ours, paper, rtol=0, atol=1e-12, err_msg=f"{key} K={j}")
        table = policies.policy_table(items).set_index("policy")
        assert table.loc["P2", "coverage"] == pytest.approx(cell.P2_coverage, abs=1e-12), key
        assert 1 - table.loc["P3", "coverage"] == pytest.approx(cell.P3_disagree_rate, abs=1e-12), key
