"""The decoder-noise decomposition (issue 22, point 7) on a toy set of trials whose every column is worked out by
hand: 4 items in two datasets, K=2 orderings, R=3 repeats, two temperatures."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from facet_probe.decoder.noise import (
    REFERENCE_NAMES,
    ParseErrors,
    PValue,
    bh_within_temperature,
    decomposition,
    decomposition_items,
    item_decomposition,
    trial_temperatures,
)
from facet_probe.scoring.run_trials import MixedRunError

PE = None  # an unparseable reply
DOCS = Path(__file__).resolve().parents[2] / "docs" / "decoder_noise.md"


def toy_trials(spec, model="m", facet="option_order"):
    """spec: (temperature source, temperature, dataset, item, gold, [answers to ordering 0], [... ordering 1])."""
    rows = []
    for source, temp, dataset, item, gold, *orderings in spec:
        for o, answers in enumerate(orderings):
            for r, a in enumerate(answers):
                prov = {} if temp is None else {source: {"temperature": temp}}
                rows.append(dict(model=model, facet=facet, dataset=dataset, item_id=item, ordering_idx=o,
                                 repeat_idx=r, permutation=[o, 1 - o], prompt_hash=f"{item}-{o}", n_options=2,
                                 answer_normalized=a, parse_status="ok" if a else "parse_error",
                                 correct=bool(a == gold) if a else False, provenance=prov))
    return pd.DataFrame(rows)


HF, API = "generation", "settings_sent"
SPEC = [
    # T=1 (an HF model records provenance.generation.temperature)
    (HF, 1.0, "d1", "A", "X", ["X", "X", "Y"], ["Y", "Y", "X"]),
    (HF, 1.0, "d1", "B", "X", ["X", "X", "X"], ["X", PE, "X"]),
    (HF, 1.0, "d2", "C", "X", ["Y", "Y", "Y"], ["X", "X", "X"]),
    (HF, 1.0, "d2", "D", "X", ["X", "X", "X"], [PE, PE, PE]),
    # T=0 (an API model records provenance.settings_sent.temperature)
    (API, 0.0, "d1", "A", "X", ["X", "X", "X"], ["X", "X", "X"]),
    (API, 0.0, "d2", "C", "X", ["Y", "Y", "Y"], ["X", "X", "X"]),
]


@pytest.fixture(scope="module")
def items():
    return decomposition_items(toy_trials(SPEC))


def row(table, **keys):
    mask = np.ones(len(table), dtype=bool)
    for k, v in keys.items():
        mask &= (table[k] == v).to_numpy()
    assert mask.sum() == 1, keys
    return table[mask].iloc[0]


def test_each_item_by_hand(items):
    a = row(items, temperature=1.0, item_id="A")
    # same pairs: 3 + 3, agreeing 1 + 1; all 15 pairs agree on 3 + 3, so cross 9 pairs agree on 4
    assert (a.same_pairs, a.cross_pairs) == (6, 9)
    assert a.d_same == pytest.approx(2 / 3) and a.d_cross == pytest.approx(5 / 9) and a.delta == pytest.approx(-1 / 9)
    assert (a.any_flip, a.any_flip_modal, a.expected_accuracy) == (1, 1, 0.5)  # modal X (right) vs Y (wrong)
    assert (a.best_ordering_accuracy, a.worst_ordering_accuracy, a.accuracy_swing) == (1, 0, 1)
    b = row(items, temperature=1.0, item_id="B")  # the parse error is dropped: 5 answers, all X
    assert (b.same_pairs, b.cross_pairs, b.d_same, b.d_cross, b.any_flip) == (4, 6, 0, 0, 0)
    assert b.parse_rate == pytest.approx(5 / 6) and b.accuracy_swing == 0 and b.kept
    c = row(items, temperature=1.0, item_id="C")
    assert (c.d_same, c.d_cross, c.delta, c.any_flip, c.expected_accuracy, c.accuracy_swing) == (0, 1, 1, 1, .5, 1)
    d = row(items, temperature=1.0, item_id="D")  # ordering 1 never parsed: no cross pair, so not kept
    assert np.isnan(d.d_cross) and not d.kept and d.parse_rate == 0.5
    assert d.expected_accuracy == 0.5 and d.worst_ordering_accuracy == 0  # no answer to ordering 1 is wrong
    assert np.isnan(d.any_flip_modal)  # one modal answer to compare
    assert row(items, temperature=0.0, item_id="A").d_same == 0


def test_a_parse_error_as_an_answer():
    b = row(item_decomposition(toy_trials(SPEC[1:2]), ParseErrors.answer), item_id="B")
    # X, PE, X: same pairs 3 + 3 agree 3 + 1; X five times: 10 agreeing pairs, 6 of them across
    assert b.d_same == pytest.approx(1 / 3) and b.d_cross == pytest.approx(1 / 3) and b.delta == pytest.approx(0)
    assert b.any_flip == 1 and b.any_flip_modal == 0  # the modal answers are X and X


def test_a_tie_in_the_modal_answer_goes_to_the_lowest_repeat():
    e = row(item_decomposition(toy_trials([(HF, 1.0, "d1", "E", "X", ["Y", "X"], ["X", "Y"])])), item_id="E")
    assert (e.best_ordering_accuracy, e.worst_ordering_accuracy, e.any_flip_modal) == (1, 0, 1)  # Y, then X


def test_pooled_over_datasets_by_hand(items):
    table = decomposition(items, by_dataset=False, n_boot=500)
    t1 = row(table, temperature=1.0)
    assert (t1.n_datasets, t1.n_items, t1.n_dropped, t1.n_trials) == (2, 3, 1, 24)
    assert t1.parse_rate == pytest.approx(20 / 24) and t1.parse_rate_drift == pytest.approx(20 / 24 - 1)
    assert t1.parse_drift_flag and (t1.median_same_pairs, t1.median_cross_pairs) == (6, 9)
    expected = dict(d_same=2 / 9, d_cross=14 / 27, delta=8 / 27, order_excess_share=4 / 7, any_flip=2 / 3,
                    any_flip_modal=2 / 3, expected_accuracy=2 / 3, best_ordering_accuracy=1,
                    worst_ordering_accuracy=1 / 3, accuracy_swing=2 / 3, answerable_rate=1,
                    accuracy_swing_answerable=2 / 3)
    for name, value in expected.items():
        assert t1[name] == pytest.approx(value), name
        if f"{name}_lo" in table:
            assert t1[f"{name}_lo"] - 1e-12 <= t1[name] <= t1[f"{name}_hi"] + 1e-12, name
    t0 = row(table, temperature=0.0)
    assert (t0.n_items, t0.d_same, t0.d_cross, t0.delta, t0.parse_rate_drift, t0.parse_drift_flag) == (
        2, 0, 0.5, 0.5, 0, False)
    assert (t0.expected_accuracy, t0.best_ordering_accuracy, t0.worst_ordering_accuracy) == (0.75, 1, 0.5)


def test_per_dataset_by_hand(items):
    table = decomposition(items, by_dataset=True, n_boot=500)
    d1 = row(table, temperature=1.0, dataset="d1")
    assert (d1.n_items, d1.d_same, d1.d_cross, d1.delta) == pytest.approx((2, 1 / 3, 5 / 18, -1 / 18))
    assert d1.parse_rate_drift == pytest.approx(11 / 12 - 1)
    d2 = row(table, temperature=1.0, dataset="d2")  # one kept item: every interval is that item's value
    assert (d2.n_items, d2.n_dropped, d2.parse_rate, d2.parse_rate_drift) == (1, 1, 0.75, -0.25)
    for name, value in dict(d_same=0, d_cross=1, delta=1, order_excess_share=1, accuracy_swing=1,
                            expected_accuracy=0.5).items():
        assert (d2[name], d2[f"{name}_lo"], d2[f"{name}_hi"]) == (value, value, value), name
    assert d2.delta_p == 0 and d2.accuracy_swing_p == 0  # FACET-PROBE's bootstrap p: no mean <= 0


def test_the_sign_flip_test_cannot_be_zero(items):
    d2 = row(decomposition(items, by_dataset=True, n_boot=400, p_value=PValue.sign_flip),
             temperature=1.0, dataset="d2")
    assert 0.3 < d2.delta_p < 0.7  # one item: its sign is + in about half the flips


def test_benjamini_hochberg_within_each_temperature():
    cells = pd.DataFrame({"temperature": [0.0, 0.0, 1.0, 1.0], "delta": [0.1, 0.2, 0.3, -0.1],
                          "delta_p": [0.01, 0.04, 0.03, 0.02], "accuracy_swing": [0.1] * 4,
                          "accuracy_swing_p": [np.nan, 0.5, 0.5, 0.5]})
    out = bh_within_temperature(cells, alpha=0.05)
    # T=0: p (0.01, 0.04) -> q (0.02, 0.04); T=1: p (0.03, 0.02) -> q (0.03, 0.03). Across all four every q
    # would be 0.04
    assert out["delta_q"].tolist() == pytest.approx([0.02, 0.04, 0.03, 0.03])
    assert out["delta_significant"].tolist() == [True, True, True, False]  # q <= 0.05 and delta > 0
    assert np.isnan(out["accuracy_swing_q"][0]) and out["accuracy_swing_q"][1] == pytest.approx(0.5)


def test_temperatures_come_from_what_each_response_records():
    trials = toy_trials(SPEC[:1] + SPEC[4:5] + [(HF, None, "d1", "P", "X", ["X"], ["X"])])
    temps = trial_temperatures(trials).tolist()
    assert temps[:6] == [1.0] * 6 and temps[6:12] == [0.0] * 6 and np.isnan(temps[12:]).all()
    assert trial_temperatures(trials.assign(temperature=0.7)).eq(0.7).all()  # a FACET-PROBE grid column


def test_two_runs_at_one_temperature_are_refused():
    with pytest.raises(MixedRunError, match="at temperature 1"):
        decomposition_items(toy_trials(SPEC[:1] + SPEC[:1]))


def test_every_column_is_defined_in_the_docs_with_its_reference_name(items):
    text = DOCS.read_text()
    defined = set(re.findall(r"^\| `([a-z_]+)` ", text, flags=re.M))
    for table in (decomposition(items, by_dataset=False, n_boot=50), decomposition(items, by_dataset=True,
                                                                                    n_boot=50)):
        stems = {re.sub(r"_(lo|hi)$", "", c) for c in table.columns}
        assert stems <= defined, stems - defined
    for ours, theirs in REFERENCE_NAMES.items():
        assert re.search(rf"^\| `{ours}` \|[^\n]*`{theirs}`", text, flags=re.M), ours


def repeated_ordering(shared: bool) -> pd.DataFrame:
    """K=3 orderings of a 2-option item (n! = 2 < K): ordering 2 shows ordering 0's permutation again, R=2."""
    answers = {0: ["X", "Y"], 1: ["X", "X"], 2: ["X", "Y"] if shared else ["X", "X"]}
    rows = []
    for o, given in answers.items():
        for r, a in enumerate(given):
            perm = [0, 1] if o != 1 else [1, 0]
            call = f"p{perm[0]}-r{r}" + ("" if shared or o != 2 else "-occurrence1")
            rows.append(dict(model="m", facet="option_order", dataset="d1", item_id="F", ordering_idx=o,
                             repeat_idx=r, permutation=perm, prompt_hash=f"p{perm[0]}", call_key=call,
                             n_options=2, answer_normalized=a, parse_status="ok", correct=a == "X",
                             provenance={HF: {"temperature": 1.0}}))
    return pd.DataFrame(rows)


def test_a_repeated_ordering_asked_again_adds_its_answers_to_that_orderings_repeats():
    """FACET-PROBE grouped answers by permutation: ordering 0's permutation got 4 answers (X Y X X). Keeping
    one trial per (ordering, repeat), as the control does, would read 2 and give d_same = d_cross = 1/2."""
    f = row(item_decomposition(repeated_ordering(shared=False)), item_id="F")
    # same pairs C(4,2) + C(2,2) = 7, agreeing 3 + 1; X five times: 10 agreeing pairs, 6 of the 8 across
    assert (f.same_pairs, f.cross_pairs) == (7, 8)
    assert f.d_same == pytest.approx(3 / 7) and f.d_cross == pytest.approx(1 / 4)


def test_a_repeated_ordering_that_shared_its_call_counts_once():
    f = row(item_decomposition(repeated_ordering(shared=True)), item_id="F")
    assert (f.same_pairs, f.cross_pairs, f.d_same, f.d_cross) == (2, 4, 0.5, 0.5)


def test_a_policy_without_a_temperature_is_a_row_of_its_own():
    items = decomposition_items(toy_trials([(HF, None, "d1", "P", "X", ["X", "Y"], ["Y", "Y"])] + SPEC[:1]))
    table = decomposition(items, by_dataset=False, n_boot=50)
    none = table[table["temperature"].isna()].iloc[0]
    # X Y | Y Y: same pairs 1 + 1 (one agrees), all 6 pairs: Y three times, 3 agree, so 2 of the 4 across
    assert (none.n_items, none.d_same, none.d_cross) == (1, 0.5, 0.5)
    assert np.isnan(none.parse_rate_drift) and not none.parse_drift_flag and none.delta_q == 1
