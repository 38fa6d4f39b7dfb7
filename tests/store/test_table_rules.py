"""The rule every written table keeps (`store.table_rules`, issue 60.8): intervals hold their points, counts are
whole, rates lie in [0, 1]; `write_csv` refuses a table that breaks it and the rehearsal finds one in its outputs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from facet_probe.store.csv_tables import write_csv
from facet_probe.store.table_rules import (
    TOLERANCE,
    Interval,
    TableRuleBroken,
    check_table,
    intervals,
    is_rate,
    violations,
)

NAN = math.nan


def problems(**columns) -> list[str]:
    return [v.line("t.csv") for v in violations(pd.DataFrame(columns))]


def test_the_names_declare_the_intervals_and_their_points():
    columns = ["flip", "flip_lo", "flip_hi", "theta_mean", "theta_q2.5", "theta_q97.5", "sigma_pi_q25",
               "sigma_pi_q75", "mean", "hdi_2.5%", "hdi_97.5%", "abs_delta_lo", "abs_delta_hi", "only_lo"]
    assert intervals(columns) == [Interval("flip_lo", "flip_hi", "flip"), Interval("theta_q2.5", "theta_q97.5",
                                  "theta_mean"), Interval("sigma_pi_q25", "sigma_pi_q75", None),
                                  Interval("hdi_2.5%", "hdi_97.5%", "mean"), Interval("abs_delta_lo", "abs_delta_hi", None)]


def test_a_rate_is_named_by_a_rate_word_and_a_difference_or_a_kappa_is_not_one():
    assert all(map(is_rate, ["flip", "flip_lo", "any_flip_parsed", "flip_rate_raw", "all_items_accuracy",
                             "paper_coverage", "observed_correct_rate"]))
    assert not any(map(is_rate, ["flip_difference", "accuracy_difference_lo", "parse_rate_drift", "delta_vs_p1",
                                 "d_same", "n_flipped", "order_excess_share", "kappa_flip"]))


def test_a_sound_table_passes():
    assert problems(model=["a", "b"], flip=[0.3, 1.0], flip_lo=[0.1, 0.9], flip_hi=[0.5, 1.0], n_items=[3, 4.0],
                    flip_difference=[-0.4, 2.0], flip_source=["exact_match", "judge"], ratio=[2.0, 3.0],
                    ratio_lo=[1.0, 0.5], ratio_hi=[math.inf, 4.0]) == []


def test_an_interval_that_excludes_its_point_is_found_with_its_table_column_and_row():
    """The table1 row of issue 60.8: 0.333 [0.025, 0.082]."""
    frame = pd.DataFrame({"model": ["m", "panel mean"], "facet": ["option_order", "document_rank_order"],
                          "flip": [0.2, 0.3333], "flip_lo": [0.1, 0.0249], "flip_hi": [0.3, 0.0816]})
    with pytest.raises(TableRuleBroken, match=r"^table1.csv: column flip_hi, row 1 \(model=panel mean, "
                                              r"facet=document_rank_order\): flip 0.3333 is outside"):
        check_table(frame, "table1.csv")
    assert len(problems(x=[5.0], **{"x_q2.5": [6.0], "x_q97.5": [7.0]})) == 1  # the quantile form


def test_an_interval_without_its_point_keeps_lo_below_hi():
    assert problems(abs_delta_lo=[0.1, 0.3], abs_delta_hi=[0.2, 0.2]) == [
        "t.csv: column abs_delta_lo, row 1: abs_delta_lo 0.3 > abs_delta_hi 0.2"]


def test_nan_is_allowed_where_the_point_is_nan_but_a_number_needs_its_interval():
    assert problems(flip=[NAN, NAN], flip_lo=[NAN, 0.9], flip_hi=[NAN, 0.1], n_items=[NAN, 2],
                    accuracy=[NAN, 0.5]) == []
    found = problems(flip=[0.5], flip_lo=[NAN], flip_hi=[0.7])
    assert len(found) == 1 and "no interval" in found[0]


def test_float_rounding_passes_and_more_does_not():
    tiny, more = TOLERANCE / 10, 1e-6
    assert problems(flip=[0.5, 1.0], flip_lo=[0.5 + tiny, 0.2], flip_hi=[0.9, 1.0 - tiny], n_x=[3 + tiny, 1],
                    accuracy=[1 + tiny, -tiny]) == []
    assert len(problems(flip=[0.5], flip_lo=[0.5 + more], flip_hi=[0.9])) == 1
    assert len(problems(accuracy=[1 + more, -more])) == 2


def test_counts_are_whole_and_rates_lie_in_0_1():
    found = problems(model=["a", "b", "c"], n_items=[2.5, -1, 3], coverage=[0.5, 1.2, -0.1])
    assert found == ["t.csv: column n_items, row 0 (model=a): 2.5 is not a whole count >= 0",
                     "t.csv: column n_items, row 1 (model=b): -1.0 is not a whole count >= 0",
                     "t.csv: column coverage, row 1 (model=b): 1.2 is a rate outside [0, 1]",
                     "t.csv: column coverage, row 2 (model=c): -0.1 is a rate outside [0, 1]"]
    assert problems(n_located=[None, None], n_options=np.array([4, NAN])) == []  # missing counts pass


def test_write_csv_refuses_a_broken_table_and_writes_nothing(tmp_path):
    path = tmp_path / "summary.csv"
    with pytest.raises(TableRuleBroken, match="summary.csv: column flip_rate_lo, row 0"):
        write_csv(pd.DataFrame({"flip_rate": [0.1], "flip_rate_lo": [0.2], "flip_rate_hi": [0.3]}), path)
    assert not path.exists()
    write_csv(pd.DataFrame({"flip_rate": [0.25], "flip_rate_lo": [0.2], "flip_rate_hi": [0.3]}), path)
    assert path.read_text() == "flip_rate,flip_rate_lo,flip_rate_hi\n0.25,0.2,0.3\n"


def test_rows_of_dicts_keep_the_rule_when_written_and_no_app_writes_a_csv_past_it(tmp_path):
    """The attack app writes its CSVs from rows of dicts (`write_rows`): an accuracy outside [0, 1] is refused and
    not written, as `write_csv`'s tables are; and no module of the package writes a CSV another way."""
    from pathlib import Path

    import facet_probe
    from facet_probe.store.csv_tables import write_rows

    path = tmp_path / "summary.csv"
    with pytest.raises(TableRuleBroken, match=r"summary.csv: column adv_accuracy, row 0 \(attack=answer\): 1.5 is a rate outside"):
        write_rows(path, [{"attack": "answer", "clean_accuracy": 1.0, "adv_accuracy": 1.5, "note": None}])
    assert not path.exists()
    write_rows(path, [{"attack": "answer", "adv_accuracy": 0.5, "extra": 1}], ["attack", "adv_accuracy"])
    assert path.read_bytes() == b"attack,adv_accuracy\r\nanswer,0.5\r\n"  # as csv.DictWriter writes it
    package = Path(facet_probe.__file__).parent
    writers = {"csv.DictWriter(", "csv.writer(", ".to_csv("}
    allowed = {package / "store" / "csv_tables.py"}
    past = [str(f.relative_to(package)) for f in package.rglob("*.py")
            if f not in allowed and any(w in f.read_text(encoding="utf-8") for w in writers)]
    assert past == []


def test_the_rehearsal_finds_a_planted_bad_interval_in_any_csv_it_wrote(tmp_path):
    from facet_probe_dev.rehearsal.joins import every_table_keeps_the_rule
    from facet_probe_dev.rehearsal.run import SCALES, Rehearsal

    (tmp_path / "paper").mkdir()
    (tmp_path / "runs" / "m").mkdir(parents=True)
    pd.DataFrame({"model": ["m"], "flip": [0.3], "flip_lo": [0.1], "flip_hi": [0.5]}).to_csv(
        tmp_path / "paper" / "table1.csv", index=False)
    rehearsal = Rehearsal(tmp_path, SCALES["ci"])
    assert every_table_keeps_the_rule(rehearsal) == []
    pd.DataFrame({"model": ["m"], "flip": [0.333], "flip_lo": [0.025], "flip_hi": [0.082]}).to_csv(
        tmp_path / "runs" / "m" / "facet_model.csv", index=False)
    assert every_table_keeps_the_rule(rehearsal) == [
        "runs/m/facet_model.csv: column flip_hi, row 0 (model=m): flip 0.333 is outside [flip_lo 0.025, flip_hi 0.082]"]
