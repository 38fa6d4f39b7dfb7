"""Same-order control: hand-computed d_same / d_cross / delta, the test and Benjamini-Hochberg."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.same_order import control_summary, item_control, same_order_control, sign_flip_p

PERMS = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [1, 0, 2], [2, 1, 0], [0, 2, 1]]


def repeated(answers_by_ordering, item="d::1", model="m", facet="option_order", dataset="d", perms=PERMS):
    """Rows for one item: answers_by_ordering[o][r] answers ordering o, repeat r (None = unparseable)."""
    return [dict(model=model, facet=facet, dataset=dataset, item_id=item, ordering_idx=o, repeat_idx=r,
                 permutation=perms[o], answer_normalized=PARSE_ERROR if a is None else a,
                 parse_status="parse_error" if a is None else "ok")
            for o, answers in enumerate(answers_by_ordering) for r, a in enumerate(answers)]


def one(rows, **kw) -> pd.Series:
    frame = item_control(pd.DataFrame(rows), **kw)
    assert len(frame) == 1
    return frame.iloc[0]


def test_hand_computed_item():
    # ordering 0: A A | ordering 1: A B | ordering 2: B B
    # same-ordering pairs: (A,A) (A,B) (B,B) -> 1 of 3 differ, d_same = 1/3
    # all 15 pairs: 3 A + 3 B -> 6 agree; same-ordering agreeing pairs 2, so cross: 12 pairs, 4 agree
    # d_cross = 8/12 = 2/3, delta = 1/3
    m = one(repeated([["A", "A"], ["A", "B"], ["B", "B"]]))
    assert (m.n_trials, m.n_orderings, m.same_pairs, m.cross_pairs) == (6, 3, 3, 12)
    assert (m.d_same, m.d_cross, m.delta) == (pytest.approx(1 / 3), pytest.approx(2 / 3), pytest.approx(1 / 3))


def test_pure_order_effect_and_pure_noise():
    order = one(repeated([["A"] * 3, ["B"] * 3, ["C"] * 3]))
    assert (order.d_same, order.d_cross, order.delta) == (0, 1, 1)
    # every ordering answered A, B, C across its 3 repeats: noise only.
    # same: 3 orderings x 3 pairs all differ -> 1; cross: 27 pairs, 9 agree -> 2/3
    noise = one(repeated([["A", "B", "C"]] * 3))
    assert (noise.d_same, noise.d_cross) == (1, pytest.approx(2 / 3))
    assert noise.delta == pytest.approx(-1 / 3)


def test_without_repeats_d_same_is_undefined():
    m = one(repeated([["A"], ["B"], ["A"]]))
    assert np.isnan(m.d_same) and np.isnan(m.delta)
    assert m.d_cross == pytest.approx(2 / 3)


def test_repeated_orderings_count_once_per_shared_call():
    # n = 2 components, K = 4: the grammar cycles [0,1] [1,0] [0,1] [1,0]; orderings 0 and 2 are the same
    # prompt, asked once per repeat and shared (one call_key), so they are one ordering, counted once per repeat.
    perms = [[0, 1], [1, 0], [0, 1], [1, 0]]
    rows = repeated([["A", "B"], ["A", "A"], ["A", "B"], ["A", "A"]], perms=perms)
    for row in rows:
        row["call_key"] = f"{row['permutation']}-{row['repeat_idx']}"
    m = one(rows)
    assert (m.n_trials, m.n_orderings, m.same_pairs) == (4, 2, 2)
    assert m.d_same == pytest.approx(1 / 2)  # (A,B) differ, (A,A) agree


def test_a_repeated_ordering_asked_at_each_index_keeps_every_answer():
    """A file without call keys or prompt hashes (FACET-PROBE's) holds one call per record: a permutation shown at
    two ordering indices got two answers per repeat, both kept (they were dropped down to one), as the reference
    grouped answers by permutation."""
    perms = [[0, 1], [1, 0], [0, 1], [1, 0]]
    answers = [["A"], ["B"], ["B"], ["B"]]
    m = one(repeated(answers, perms=perms))
    # the reference's rule: answers grouped by permutation -> [0,1]: A, B; [1,0]: B, B
    groups = {}
    for perm, (answer,) in zip(perms, answers, strict=True):
        groups.setdefault(tuple(perm), []).append(answer)
    same = [(a != b) for g in groups.values() for i, a in enumerate(g) for b in g[i + 1:]]
    flat = [(p, a) for p, g in groups.items() for a in g]
    cross = [(a != b) for i, (p, a) in enumerate(flat) for q, b in flat[i + 1:] if p != q]
    assert (m.n_trials, m.n_orderings) == (4, 2)
    assert (m.d_same, m.d_cross) == (pytest.approx(np.mean(same)), pytest.approx(np.mean(cross)))


def test_parse_errors_are_an_answer_unless_dropped():
    rows = repeated([["A", None], ["A", "A"]])
    kept = one(rows)
    assert kept.d_same == pytest.approx(1 / 2)
    dropped = one(rows, drop_parse_errors=True)
    assert (dropped.n_trials, dropped.d_same, dropped.d_cross) == (3, 0, 0)


def test_sign_flip_p_value():
    rng = np.random.default_rng(0)
    assert sign_flip_p(np.full(20, 0.3), 999, rng) == pytest.approx(1 / 1000)  # only all +1 reaches it
    p = sign_flip_p(np.array([0.1, -0.1, 0.2, -0.2]), 2000, rng)
    assert 0.3 < p < 0.8
    assert np.isnan(sign_flip_p(np.array([np.nan]), 10, rng))


def test_cells_share_ci_and_benjamini_hochberg():
    rows = []
    # cell "order": 12 items with d_same 0 and d_cross 1 (order effect)
    for i in range(12):
        rows += repeated([["A", "A"], ["B", "B"], ["C", "C"]], item=f"o::{i}", dataset="order")
    # cell "noise": 12 items whose answers are noise only (delta < 0)
    for i in range(12):
        rows += repeated([["A", "B"], ["A", "B"], ["A", "B"]], item=f"n::{i}", dataset="noise")
    items, cells = same_order_control(pd.DataFrame(rows), n_boot=999, seed=1)
    cells = cells.set_index("dataset")
    order, noise = cells.loc["order"], cells.loc["noise"]
    assert (order.d_same, order.d_cross, order.delta, order.order_excess_share) == (0, 1, 1, 1)
    assert order.delta_lo == order.delta_hi == 1
    assert order.p_value == pytest.approx(1 / 1000)
    # noise: same pairs 3 of 3 differ; cross 12 pairs, 6 agree -> d_cross 1/2, delta -1/2
    assert (noise.d_same, noise.d_cross, noise.delta) == (1, 0.5, -0.5)
    assert noise.order_excess_share == -1
    assert noise.p_value == 1
    # BH with two p-values: q = min(1, p * m / rank)
    assert order.q_value == pytest.approx(min(1, order.p_value * 2))
    assert noise.q_value == pytest.approx(1)
    assert bool(order.significant) and not bool(noise.significant)
    assert (order.n_items, order.n_items_with_repeats) == (12, 12)


def test_a_cell_without_repeats_has_no_test():
    cells = control_summary(item_control(pd.DataFrame(repeated([["A"], ["B"]]))), n_boot=50)
    c = cells.iloc[0]
    assert c.n_items_with_repeats == 0
    assert np.isnan(c.delta) and np.isnan(c.p_value) and np.isnan(c.q_value) and not c.significant
