"""The sem-flip table per case, counted from the judged rows by hand (computed with one grouped pass over the rows
since the per-case loop took minutes at paper scale: these cases pin what each column counts)."""

from __future__ import annotations

import math

import pandas as pd

from facet_probe.judge.agreement import FLIP_COLUMNS, semantic_flip


def rows(item: str, verdicts: list, set_verdict: str | None, key: str, model: str = "m", unreadable: bool = False,
         cut: tuple = ()) -> list[dict]:
    return [{"judge": "g", "protocol": "per_answer", "model": model, "facet": "f", "dataset": "d", "item_id": item,
             "repeat_idx": 0, "trial_key": f"{key}-{i}", "verdict": v, "set_verdict": set_verdict,
             "judgment_key": key, "unreadable": unreadable, "answer_cut": i in cut} for i, v in enumerate(verdicts)]


def test_each_column_counts_what_it_names_per_case_in_key_order():
    judged = pd.DataFrame([
        *rows("d::2", [None, "A", "B", "C", "D"], "C", "j2", cut=(3,)),
        *rows("d::1", [None, "A", "A", None], "A", "j1"),  # the fourth answer has no verdict yet
        *rows("d::3", [None, None], None, "j3", unreadable=True),  # a reply with no verdict: retried
        *rows("d::3", [None, None], None, "j3", unreadable=True),  # the same judgment from a second run folder
        *rows("d::3", [None, "B"], None, "j4", unreadable=True),  # another judgment of the case, unreadable too
        *rows("d::1", [None, "C"], "B", "j5", model="a"),
    ])
    flips = semantic_flip(judged)
    assert list(flips.columns) == FLIP_COLUMNS
    assert list(zip(flips["model"], flips["item_id"], strict=True)) == [("a", "d::1"), ("m", "d::1"), ("m", "d::2"),
                                                                        ("m", "d::3")]
    by = flips.set_index(["model", "item_id"])
    two = by.loc[("m", "d::2")]
    assert (two.n_A, two.n_B, two.n_C, two.n_D, two.n_judged) == (1, 1, 1, 1, 4)
    assert two.sem_flip_answers == 0.5 and two.sem_flip_set == 1.0 and two.set_verdict == "C"
    assert two.n_answers_cut == 1 and two.unreadable == 0
    one = by.loc[("m", "d::1")]
    assert (one.n_A, one.n_judged, one.sem_flip_answers, one.sem_flip_set) == (2, 2, 0.0, 0.0)
    three = by.loc[("m", "d::3")]
    assert three.unreadable == 2  # two judgments with no verdict, the copy not counted again
    assert pd.isna(three.set_verdict) and math.isnan(three.sem_flip_set) and three.n_B == 1
    assert by.loc[("a", "d::1")].set_verdict == "B" and by.loc[("a", "d::1")].sem_flip_set == 1.0


def test_without_judgment_keys_a_case_with_any_unreadable_reply_counts_one():
    judged = pd.DataFrame([*rows("d::1", [None, None], None, "j1", unreadable=True),
                           *rows("d::1", [None, None], None, "j2", unreadable=True),
                           *rows("d::2", [None, "A"], "A", "j3")]).drop(columns=["judgment_key"])
    assert semantic_flip(judged).set_index("item_id")["unreadable"].to_dict() == {"d::1": 1, "d::2": 0}


def test_no_rows_give_the_columns_and_no_case():
    assert list(semantic_flip(pd.DataFrame(columns=["judge", "verdict"])).columns) == FLIP_COLUMNS
