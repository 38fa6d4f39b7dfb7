"""Order-sensitivity metrics: hand-computed items, both parse-error treatments, cells and the paper tables."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.flips import (
    bootstrap_means,
    cell_rng,
    cell_summary,
    compute_metrics,
    group_intervals,
    item_metrics,
    nested_weights,
    paper_tables,
    wilson_interval,
)


def trials(answers, item="d::1", facet="option_order", model="m", dataset="d", n_options=4, repeat=0,
           gold="A"):
    """Trial rows for one item: answers[o] is the answer under ordering o (None = unparseable)."""
    return [dict(model=model, facet=facet, dataset=dataset, item_id=item, ordering_idx=o, repeat_idx=repeat,
                 answer_normalized=PARSE_ERROR if a is None else a, gold_normalized=gold,
                 parse_status="parse_error" if a is None else "ok", correct=a == gold,
                 n_options=n_options)
            for o, a in enumerate(answers)]


def one(rows) -> pd.Series:
    frame = item_metrics(pd.DataFrame(rows))
    assert len(frame) == 1
    return frame.iloc[0]


def test_a_stable_item():
    m = one(trials("AAAAAA"))
    assert (m.any_flip, m.disagreement, m.osi, m.modal_answer, m.modal_fraction, m.accuracy) == (
        0, 0, 0, "A", 1, 1)
    assert (m.n_orderings, m.n_parsed, m.parse_rate, m.n_answers) == (6, 6, 1, 1)


def test_a_split_item_by_hand():
    # A A B B A B: 3 x A, 3 x B; agreeing pairs 3 + 3 of 15, so disagreement 9/15.
    # OSI = entropy log 2 over log min(K=6, 4 options) = log 2 / log 4 = 0.5.
    m = one(trials("AABBAB"))
    assert m.any_flip == 1
    assert m.disagreement == pytest.approx(9 / 15)
    assert m.osi == pytest.approx(0.5)
    assert m.accuracy == pytest.approx(0.5)


def test_osi_normaliser_is_log_min_k_and_n_options():
    # two options, six orderings: 3 A + 3 B is maximal uncertainty, OSI 1 (log 2 / log min(6, 2))
    assert one(trials("ABABAB", n_options=2)).osi == pytest.approx(1.0)
    # ten options, K = 6: six different answers is maximal, OSI 1 (log 6 / log min(6, 10))
    assert one(trials("ABCDEF", n_options=10)).osi == pytest.approx(1.0)
    # free-form (no n_options): log K
    m = one(trials(["x", "x", "x", "y", "y", "y"], facet="evidence_chunk_order", n_options=None, gold="x"))
    assert m.osi == pytest.approx(math.log(2) / math.log(6))


def test_modal_ties_go_to_the_answer_of_the_earliest_ordering():
    # B, A, A, B, C, C: a three-way tie; ordering 0 said B
    m = one(trials("BAABCC"))
    assert (m.modal_answer, m.modal_fraction, m.modal_correct) == ("B", pytest.approx(1 / 3), 0)
    assert one(trials("CABBAC")).modal_answer == "C"


def test_parse_errors_are_counted_both_ways():
    # A B C D ? ?: as a distinct answer: counts 1,1,1,1,2 -> 4 + 1 = 14 of 15 pairs differ
    # dropped: A B C D -> all 6 pairs differ
    m = one(trials(["A", "B", "C", "D", None, None]))
    assert (m.n_parsed, m.parse_rate) == (4, pytest.approx(4 / 6))
    assert m.disagreement == pytest.approx(14 / 15)
    assert m.disagreement_parsed == pytest.approx(1.0)
    entropy = -(4 * (1 / 6) * math.log(1 / 6) + (2 / 6) * math.log(2 / 6))
    assert m.osi == pytest.approx(entropy / math.log(5))  # 4 options + the parse error
    assert m.osi_parsed == pytest.approx(1.0)  # log 4 / log min(4, 4)
    assert (m.n_answers, m.n_answers_parsed) == (5, 4)
    assert m.accuracy == pytest.approx(1 / 6)  # a parse error is wrong


def test_a_parse_error_alone_is_a_flip_only_when_counted_as_an_answer():
    m = one(trials(["A", "A", "A", "A", "A", None]))
    assert (m.any_flip, m.any_flip_parsed) == (1, 0)


def test_items_with_fewer_than_two_answers_have_no_dispersion():
    m = one(trials(["A", None, None, None, None, None]))
    assert np.isnan(m.any_flip_parsed) and np.isnan(m.disagreement_parsed) and np.isnan(m.osi_parsed)
    assert m.any_flip == 1
    m = one(trials([None] * 6))
    assert (m.modal_answer, m.parse_rate) == (PARSE_ERROR, 0)
    assert np.isnan(m.modal_fraction)


def test_flip_metrics_use_repeat_zero_only():
    rows = trials("AAAAAA", repeat=0) + trials("BBBBBB", repeat=1)
    m = one(rows)
    assert (m.any_flip, m.modal_answer, m.n_orderings) == (0, "A", 6)


def test_reference_files_null_answers_and_option_permutation_length():
    rows = [dict(facet="option_order", dataset="toy", model="toy-model", item_id="toy::1", ordering_idx=o,
                 permutation=[0, 1, 2], answer_normalized=a, correct=None if a is None else a == "0",
                 score_kind="option_content_idx")
            for o, a in enumerate(["0", "1", None])]
    m = one(rows)
    assert m.n_options == 3  # len(permutation) for option permutations
    assert (m.n_parsed, m.any_flip_parsed, m.disagreement) == (2, 1, 1)
    assert m.accuracy == pytest.approx(1 / 3)


def naive_item(answers, n_options):
    """The definitions, one item at a time, for comparison with the vectorised code."""
    k = len(answers)
    counts = Counter(answers)
    entropy = -sum(c / k * math.log(c / k) for c in counts.values())
    possible = k if n_options is None else n_options + (PARSE_ERROR in counts)
    agree = sum(c * (c - 1) for c in counts.values())
    return len(counts) > 1, 1 - agree / (k * (k - 1)), entropy / math.log(min(k, possible))


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["A", "B", "C", None]), min_size=2, max_size=8),
                          st.sampled_from([3, 5, None])), min_size=1, max_size=6))
def test_vectorised_metrics_match_the_per_item_definitions(items):
    rows = [r for i, (answers, n_opt) in enumerate(items)
            for r in trials(answers, item=f"d::{i}", n_options=n_opt)]
    got = item_metrics(pd.DataFrame(rows)).set_index("item_id")
    for i, (answers, n_opt) in enumerate(items):
        flip, disagreement, osi = naive_item([PARSE_ERROR if a is None else a for a in answers], n_opt)
        m = got.loc[f"d::{i}"]
        assert (m.any_flip, m.disagreement, m.osi) == (flip, pytest.approx(disagreement), pytest.approx(osi))


def test_bootstrap_means_are_seeded_resampled_means_and_ignore_nan():
    values = np.array([[0.0, 1.0], [1.0, np.nan], [1.0, 3.0]])
    a = bootstrap_means(values, 500, np.random.default_rng(1))
    b = bootstrap_means(values, 500, np.random.default_rng(1))
    assert np.array_equal(a, b, equal_nan=True)
    assert a.shape == (500, 2)
    assert np.all((a[:, 0] >= 0) & (a[:, 0] <= 1))
    assert set(np.round(a[:, 0] * 3).astype(int)) <= {0, 1, 2, 3}  # means of 3 draws of 0/1
    assert a[:, 0].mean() == pytest.approx(2 / 3, abs=0.05)
    finite = a[:, 1][~np.isnan(a[:, 1])]
    assert np.all((finite >= 1) & (finite <= 3))  # the NaN row never enters a mean


def test_cell_summary_means_and_cis():
    rows = trials("AAAAAA", item="d::1") + trials("AABBAB", item="d::2") + trials("ABABAB", item="d::3")
    items = item_metrics(pd.DataFrame(rows))
    cells = cell_summary(items, n_boot=300, seed=3)
    assert len(cells) == 1
    c = cells.iloc[0]
    assert (c.n_items, c.n_trials) == (3, 18)
    assert c.any_flip == pytest.approx(2 / 3)
    assert c.any_flip_lo <= c.any_flip <= c.any_flip_hi
    assert c.any_flip_lo >= 0 and c.any_flip_hi <= 1
    again = cell_summary(items, n_boot=300, seed=3)
    pd.testing.assert_frame_equal(cells, again)


def test_a_cells_ci_does_not_depend_on_other_cells():
    base = trials("AABBAB", item="d::1") + trials("AAAAAA", item="d::2") + trials("ABCABC", item="d::3")
    other = trials("AAAAAA", item="e::1", dataset="e")
    alone = cell_summary(item_metrics(pd.DataFrame(base)), n_boot=200, seed=0)
    joint = cell_summary(item_metrics(pd.DataFrame(base + other)), n_boot=200, seed=0)
    pd.testing.assert_series_equal(alone.iloc[0], joint[joint.dataset == "d"].iloc[0], check_names=False)


def test_paper_tables_weight_datasets_facets_and_models_equally():
    rows = []
    # model m1, option_order: dataset d1 has 3 flipping items, d2 has 1 stable item -> (1 + 0) / 2
    for i in range(3):
        rows += trials("AB" * 3, item=f"d1::{i}", dataset="d1", model="m1")
    rows += trials("A" * 6, item="d2::0", dataset="d2", model="m1")
    # model m1, evidence_chunk_order: one flipping item; m2: everything stable
    rows += trials("AB" * 3, item="d3::0", dataset="d3", model="m1", facet="evidence_chunk_order")
    rows += trials("A" * 6, item="d1::0", dataset="d1", model="m2")
    rows += trials("A" * 6, item="d3::0", dataset="d3", model="m2", facet="evidence_chunk_order")
    # a diagnostic facet is not in the main mean
    rows += trials("AB" * 3, item="d4::0", dataset="d4", model="m2", facet="few_shot_order")
    result = compute_metrics(pd.DataFrame(rows), n_boot=50)
    fm = result.paper.facet_model.set_index(["model", "facet"])
    assert fm.loc[("m1", "option_order"), "any_flip"] == pytest.approx(0.5)
    assert fm.loc[("m1", "option_order"), "n_datasets"] == 2
    mm = result.paper.model_main.set_index("model")
    assert mm.loc["m1", "any_flip"] == pytest.approx((0.5 + 1.0) / 2)
    assert mm.loc["m2", "any_flip"] == 0 and mm.loc["m2", "n_facets"] == 2
    panel = result.paper.panel.set_index("facet")
    assert panel.loc["option_order", "any_flip"] == pytest.approx((0.5 + 0) / 2)
    assert panel.loc["main", "any_flip"] == pytest.approx((0.75 + 0) / 2)
    assert panel.loc["few_shot_order", "any_flip"] == 1


def test_paper_tables_take_only_cell_means():
    cells = pd.DataFrame({"model": ["m", "m"], "facet": ["option_order", "option_order"],
                          "dataset": ["a", "b"], "any_flip": [0.2, 0.4]})
    tables = paper_tables(cells, metrics=("any_flip",))
    assert tables.facet_model["any_flip"].iloc[0] == pytest.approx(0.3)


def test_missing_columns_are_a_clear_error():
    with pytest.raises(ValueError, match="answer_normalized"):
        item_metrics(pd.DataFrame({"facet": ["f"], "dataset": ["d"], "item_id": ["d::1"], "ordering_idx": [0]}))


# --- the one interval rule: item bootstrap, Wilson where the bootstrap degenerates -------------------


def stable_items(n: int, model="m", dataset="d") -> pd.DataFrame:
    rows = [r for i in range(n) for r in trials("AAAAAA", item=f"{dataset}::{i}", model=model, dataset=dataset)]
    return item_metrics(pd.DataFrame(rows))


def test_wilson_interval_of_0_and_200_of_200():
    lo, hi = wilson_interval(np.array([0, 200]), np.array([200, 200]))
    assert lo[0] == 0 and hi[0] == pytest.approx(0.0188, abs=5e-4)
    assert lo[1] == pytest.approx(1 - 0.0188, abs=5e-4) and hi[1] == 1


def test_no_flip_in_200_items_gets_a_wilson_interval_not_0_0():
    """Every item stable: every bootstrap replicate is 0, so the percentile interval is [0, 0]; the rule
    gives Wilson's [0, 0.019] instead (and [0.981, 1] for an accuracy of 1)."""
    c = cell_summary(stable_items(200), n_boot=200, seed=1).iloc[0]
    assert c.any_flip == 0 and c.any_flip_lo == 0
    assert c.any_flip_hi == pytest.approx(0.0188, abs=5e-4)
    assert c.accuracy == 1 and c.accuracy_hi == 1 and c.accuracy_lo == pytest.approx(0.9812, abs=5e-4)


def test_a_varied_cell_keeps_its_bootstrap_percentile_interval():
    rows = [r for i in range(40) for r in trials("AAAAAA" if i % 4 else "AABBAB", item=f"d::{i}")]
    items = item_metrics(pd.DataFrame(rows))
    c = cell_summary(items, n_boot=400, seed=2).iloc[0]
    values = items["any_flip"].to_numpy()
    boot = bootstrap_means(values, 400, cell_rng(2, ("m", "option_order", "d")))
    lo, hi = np.quantile(boot[:, 0], [0.025, 0.975])
    assert (c.any_flip_lo, c.any_flip_hi) == pytest.approx((lo, hi))


def test_group_intervals_average_the_dataset_bootstraps_and_fall_back_to_wilson():
    items = pd.concat([stable_items(100, dataset="d1"), stable_items(100, dataset="d2")], ignore_index=True)
    ci = group_intervals(items, ["model", "facet"], n_boot=100, seed=0).iloc[0]
    assert ci.any_flip_lo == 0 and ci.any_flip_hi == pytest.approx(0.0188, abs=5e-4)  # Wilson on the 200 items
    flips = item_metrics(pd.DataFrame([r for i in range(50) for r in trials("AB" * 3 if i % 2 else "A" * 6,
                                                                            item=f"d3::{i}", dataset="d3")]))
    mixed = group_intervals(pd.concat([items, flips], ignore_index=True), ["model", "facet"], n_boot=300).iloc[0]
    mean = (0 + 0 + 0.5) / 3  # the paper's mean over datasets
    assert mixed.any_flip_lo < mean < mixed.any_flip_hi


def test_a_mean_over_unequal_datasets_gets_an_interval_around_its_own_point():
    """Issue 60.8: 2 items of one dataset flip, 100 of another do not; the mean over datasets is 0.5 and every
    replicate is 0.5. Wilson on the pooled items (2 of 102) excluded it; Wilson at 0.5 with the effective number
    of items ((sum w)^2 / sum w^2, each dataset weighing 1/2) contains it."""
    flips = item_metrics(pd.DataFrame([r for i in range(2) for r in trials("AB" * 3, item=f"d1::{i}", dataset="d1")]))
    items = pd.concat([flips, stable_items(100, dataset="d2")], ignore_index=True)
    ci = group_intervals(items, ["model", "facet"], n_boot=50, seed=0).iloc[0]
    n_eff = 1 / (2 * (1 / 4) ** 2 + 100 * (1 / 200) ** 2)
    lo, hi = wilson_interval(np.array(n_eff / 2), np.array(n_eff))
    assert (ci.any_flip_lo, ci.any_flip_hi) == pytest.approx((float(lo), float(hi)))
    assert ci.any_flip_lo <= 0.5 <= ci.any_flip_hi


def test_nested_weights_make_a_weighted_mean_the_mean_of_means():
    values = np.array([[1.0, 0.0], [0.0, np.nan], [1.0, 1.0], [np.nan, np.nan], [0.0, 1.0]])
    outer, inner = np.array([0, 0, 0, 1, 1]), np.array([0, 0, 1, 2, 2])
    weights = nested_weights(~np.isnan(values), [outer, inner])
    # column 0: group 0 = mean(mean(1, 0), 1) = 0.75; group 1 = 0 (its NaN item left out); overall 0.375
    # column 1: group 0 = mean(0, 1) = 0.5 (the NaN item left out of its cell); group 1 = 1; overall 0.75
    assert np.nansum(weights * np.nan_to_num(values), axis=0) == pytest.approx([0.375, 0.75])
    assert weights.sum(axis=0) == pytest.approx([1, 1]) and weights[3].tolist() == [0, 0]
    assert nested_weights(np.ones((4, 1), bool), [np.zeros(4, int)]).ravel().tolist() == [0.25] * 4


def test_group_rows_yields_what_a_sorted_groupby_yields_without_a_frame_per_group():
    from facet_probe.metrics.flips import group_rows

    frame = pd.DataFrame({"model": ["b", "a", "b", None, "a", "b"], "facet": ["x", "y", "x", "x", "x", "y"],
                          "v": range(6)})
    for keys in (["model", "facet"], ["facet"]):
        expected = [(k if isinstance(k, tuple) else (k,), g.index.to_numpy())
                    for k, g in frame.groupby(keys, sort=True)]
        got = group_rows(frame, keys)
        assert [k for k, _ in got] == [k for k, _ in expected]
        assert all((a == b).all() for (_, a), (_, b) in zip(got, expected, strict=True))
    assert group_rows(frame.iloc[:0], ["model"]) == []  # no rows: no groups (was one empty group, a zip error)


def test_the_95_percent_normal_quantile_is_scipys_bit_for_bit():
    from scipy.special import ndtri

    from facet_probe.metrics.flips import Z_975, normal_quantile

    assert ndtri(0.975) == Z_975
    for p in (0.9, 0.95, 0.975, 0.995):
        assert normal_quantile(p) == ndtri(p)
