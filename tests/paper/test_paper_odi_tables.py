"""`table2-odi` and `table-odi-intervals`: the paper's ODI values stand only beside our column of the same
quantity, from a fit of the paper's kind (the modal outcome built by the reference's rule; |E delta| and sigma_delta
exist in the paper variant alone). ODI folders are written by hand in the ODI app's layout (no fit)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.paper import targets

FACETS = ["option_order", "image_set_order"]


def odi_folder(root: Path, variant: str, modal_rule: str) -> Path:
    """An ODI output folder (facet_probe/odi/pipeline.py's layout) with made-up numbers for both outcomes."""
    for outcome, rule in (("modal", modal_rule), ("correct", None)):
        folder = root / outcome
        folder.mkdir(parents=True)
        (folder / "fit_summary.json").write_text(json.dumps({"variant": variant}))
        decomposition = {"variant": variant, "modal_rule": rule, "facet": FACETS, "n_items": [10, 10],
                         "sigma_pi_median": [0.1, 0.2], "ratio_sigma_pi": [1.0, 2.0], "mean_abs_delta": [0.02, 0.05],
                         "abs_delta_lo": [0.0, 0.01], "abs_delta_hi": [0.04, 0.09]}
        intervals = {"variant": variant, "modal_rule": rule, "facet": FACETS, "n_items": [10, 10],
                     "sigma_pi_draw_median": [0.09, 0.18], "sigma_pi_draw_median_lo": [0.05, 0.1],
                     "sigma_pi_draw_median_hi": [0.12, 0.25]}
        if variant == "paper":
            decomposition |= {"delta_abs_mean": [0.01, 0.03], "delta_ratio_vs_option": [1.0, 3.0]}
            intervals |= {"sigma_delta_median": [0.01, 0.05], "sigma_delta_median_lo": [0.0, 0.0],
                          "sigma_delta_median_hi": [0.03, 0.1]}
        pd.DataFrame(decomposition).to_csv(folder / "decomposition.csv", index=False)
        pd.DataFrame(intervals).to_csv(folder / "posterior_intervals.csv", index=False)
    (root / "odi_status.json").write_text('{"state": "complete"}')
    return root


@pytest.fixture
def three_fits(tmp_path) -> Path:
    """The paper's kind of fit, a positional fit by the reference's rule, and a paper fit by our hash rule."""
    odi_folder(tmp_path / "in" / "paper", "paper", "drop_ties")
    odi_folder(tmp_path / "in" / "positional", "positional", "drop_ties")
    odi_folder(tmp_path / "in" / "hash", "paper", "break_ties")
    return tmp_path


def built(root: Path, target: str, name: str) -> pd.DataFrame:
    targets.TARGETS[target](targets.Inputs(paths=[root / "in"], out=root / "out"))
    table = pd.read_csv(root / "out" / f"{name}.csv")
    return table.assign(fit=table["odi"].map(lambda p: Path(p).name)).set_index(["fit", "outcome", "facet"])


def test_table2_sets_the_papers_delta_only_beside_the_references_delta_of_a_paper_fit(three_fits):
    """Issue 60.1: paper_delta_abs_mean beside our delta_abs_mean (|E delta|) of the paper variant's modal fit, never
    beside the positional variant's numbers or a fit of another modal rule; ours (E|delta|) keeps its own name."""
    table = built(three_fits, "table2-odi", "table2_odi")
    positional = table.loc[("positional", "modal", "image_set_order")]
    assert pd.isna(positional["paper_delta_abs_mean"]) and pd.isna(positional["paper_delta_ratio_vs_option"])
    assert positional["paper_sigma_pi_median"] == pytest.approx(0.151824298, abs=1e-9)  # sigma_pi: one definition
    row = table.loc[("paper", "modal", "image_set_order")]
    assert row["paper_delta_abs_mean"] == pytest.approx(0.021609771, abs=1e-9)
    assert row["paper_delta_ratio_vs_option"] == pytest.approx(8.249920764891712)
    assert row["paper_ratio_sigma_pi"] == pytest.approx(1.7344267491304886)
    assert row["delta_abs_mean"] == 0.03 and row["mean_abs_delta"] == 0.05
    assert "none beside delta_abs_mean" in positional["paper_comparison"]
    paper_columns = [c for c in table if c.startswith("paper_") and c != "paper_comparison"]
    assert table.loc[("hash", "modal")][paper_columns].isna().all().all()  # another outcome: nothing beside
    assert table.xs("correct", level="outcome")[paper_columns].isna().all().all()
    assert "odi.modal_rule=drop_ties" in table.loc[("hash", "modal", "option_order"), "paper_comparison"]
    tex = (three_fits / "out" / "table2_odi.tex").read_text()
    assert "paper\\_delta\\_abs\\_mean" in tex and "delta\\_abs\\_mean" in tex


def test_the_appendix_intervals_are_shown_beside_the_released_ones_like_with_like(three_fits):
    """Issue 60.3: the released per-draw median of sigma_pi and sigma_delta with their 89% HDIs beside ours."""
    table = built(three_fits, "table-odi-intervals", "table_odi_intervals")
    row = table.loc[("paper", "modal", "image_set_order")]
    assert (row["paper_sigma_pi_draw_median"], row["paper_sigma_pi_draw_median_lo"],
            row["paper_sigma_pi_draw_median_hi"]) == pytest.approx((0.147333, 0.077929, 0.224815))
    assert (row["paper_sigma_delta_median"], row["paper_sigma_delta_median_lo"],
            row["paper_sigma_delta_median_hi"]) == pytest.approx((0.063795, 0.000011, 0.143136))
    positional = table.loc[("positional", "modal", "image_set_order")]
    assert positional["paper_sigma_pi_draw_median"] == pytest.approx(0.147333)
    assert pd.isna(positional["paper_sigma_delta_median"])  # the positional variant has no sigma_delta
    assert table.loc[("hash", "modal"), "paper_sigma_pi_draw_median"].isna().all()


def test_an_odi_folder_written_before_the_modal_rule_was_recorded_gets_no_paper_value(tmp_path):
    """Before issue 60 every modal outcome was built by the hash rule: another outcome than the paper's."""
    folder = odi_folder(tmp_path / "in" / "old", "paper", "drop_ties")
    for outcome in ("modal", "correct"):
        path = folder / outcome / "decomposition.csv"
        pd.read_csv(path).drop(columns=["variant", "modal_rule"]).to_csv(path, index=False)
    table = built(tmp_path, "table2-odi", "table2_odi")
    assert table.filter(like="paper_").drop(columns="paper_comparison").isna().all().all()
