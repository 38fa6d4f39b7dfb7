"""Table 1's aggregation (datasets, then facets, then models: unweighted), its intervals, and `verify`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facet_probe.metrics.flips import wilson_interval
from facet_probe.paper import published, table1


def items_of(cells: dict[tuple[str, str, str], list[int]]) -> pd.DataFrame:
    rows = [{"model": m, "facet": f, "dataset": d, "item_id": f"{d}::{i}", "flip": v, "flip_source": "exact_match"}
            for (m, f, d), flips in cells.items() for i, v in enumerate(flips)]
    return pd.DataFrame(rows)


CELLS = {("m1", "option_order", "d1"): [1, 0], ("m1", "option_order", "d2"): [1, 1, 1, 0],
         ("m1", "evidence_chunk_order", "d3"): [0, 0],
         ("m2", "option_order", "d1"): [0, 0], ("m2", "option_order", "d2"): [0, 0, 0, 0],
         ("m2", "evidence_chunk_order", "d3"): [1, 1]}


def test_cells_are_averaged_unweighted_at_every_level():
    t = table1.table1(items_of(CELLS), n_boot=200).set_index(["model", "facet"])
    assert t.loc[("m1", "option_order"), "flip"] == pytest.approx(0.625)  # (0.5 + 0.75) / 2, not 4/6
    assert t.loc[("m1", "mean5"), "flip"] == pytest.approx(0.3125)  # (0.625 + 0) / 2
    assert t.loc[("m2", "mean5"), "flip"] == pytest.approx(0.5)
    assert t.loc[("panel mean", "option_order"), "flip"] == pytest.approx(0.3125)
    assert t.loc[("panel mean", "mean5"), "flip"] == pytest.approx(0.40625)
    assert (t["flip_lo"] <= t["flip"] + 1e-12).all() and (t["flip"] <= t["flip_hi"] + 1e-12).all()


def test_a_cell_with_no_flip_gets_a_wilson_interval_not_zero_width():
    t = table1.table1(items_of(CELLS), n_boot=200).set_index(["model", "facet"])
    lo, hi = t.loc[("m1", "evidence_chunk_order"), ["flip_lo", "flip_hi"]]
    assert lo == 0.0 and hi > 0.3  # Wilson for 0 of 2


def test_the_wide_table_prints_the_papers_value_and_the_difference_where_a_model_matches():
    cells = {("qwen35_9b", "option_order", "mmlu_pro"): [1, 0, 0, 0]}
    wide = table1.wide(table1.table1(items_of(cells), n_boot=50), published.table1())
    assert wide.loc["qwen35_9b", "option_order | paper (diff)"] == "0.397 (-0.147)"  # the paper: 0.3965; 0.25 - 0.3965


PAPER_DATASETS = {"option_order": ("mmlu_pro", "commonsense_qa", "mathvision")}


def test_the_papers_value_is_shown_only_where_model_facet_and_datasets_match():
    """A cell over the paper's datasets gets the paper's value and the difference; the same model and facet over
    other datasets (one of the three, or the synthetic sets) does not: it is another population."""
    same = {("qwen35_9b", "option_order", d): [1, 0, 0, 0] for d in PAPER_DATASETS["option_order"]}
    other = {("qwen35_4b", "option_order", "mmlu_pro"): [1, 0, 0, 0],
             ("gpt_55", "option_order", "synthetic_mcq"): [1, 1, 0, 0]}
    items = items_of({**same, **other})
    long = table1.same_population(table1.table1(items, n_boot=50), items, published.table1(), PAPER_DATASETS)
    rows = long.set_index(["model", "facet"])
    assert rows.loc[("qwen35_9b", "option_order"), "paper_flip"] == pytest.approx(0.3965)
    assert rows.loc[("qwen35_9b", "option_order"), "paper_difference"] == pytest.approx(0.25 - 0.3965)
    for model in ("qwen35_4b", "gpt_55"):
        assert rows.loc[(model, "option_order"), ["paper_flip", "paper_difference"]].isna().all()
        assert rows.loc[(model, "option_order"), "paper_population"].startswith("differs: ours")
    assert rows.loc[("qwen35_9b", "mean5"), "paper_population"].startswith("differs")  # four main facets missing
    assert pd.isna(rows.loc[("qwen35_9b", "mean5"), "paper_difference"])
    wide = table1.wide(table1.table1(items, n_boot=50), long[["model", "facet", "paper_flip"]])
    assert wide.loc["qwen35_9b", "option_order | paper (diff)"] == "0.397 (-0.147)"
    assert wide.loc["gpt_55", "option_order | paper (diff)"] == ""


def test_verify_reproduces_every_published_mean_and_catches_a_changed_cell():
    assert published.verify()["ok"].all()
    cells = published.release_cells()
    cells.loc[(cells["facet"] == "mixed_modality_order") & (cells["model"] == "gpt_55"), "any_flip"] += 0.01
    bad = published.verify(cells)
    assert not bad["ok"].all()
    assert "table1 gpt_55 mixed_modality_order" in set(bad.loc[~bad["ok"], "check"])


def test_model_flips_are_table_ones_mean5_rows_with_their_sources():
    """Issue 39.3: one function gives Table 1's per-model mean5 (ODI's capability reads it) and its sources."""
    items = items_of(CELLS)
    items.loc[items["facet"] == "evidence_chunk_order", "flip_source"] = "sem_flip_set_j"
    table = table1.table1(items, n_boot=200).set_index(["model", "facet"])
    flips = table1.model_flips(items, n_boot=200).set_index("model")
    mean5 = table.xs("mean5", level="facet").drop(index="panel mean")
    pd.testing.assert_frame_equal(flips, mean5[flips.columns])
    assert flips["flip_source"].tolist() == ["exact_match+sem_flip_set_j"] * 2
    assert table.loc[("m1", "option_order"), "flip_source"] == "exact_match"


def test_a_mean_of_unequal_cells_gets_an_interval_around_its_own_point():
    """Issue 60.8: one model flips its 10 items, two others none of their 105; every replicate is 1/3, so the
    fallback applies. The interval was Wilson on the 220 pooled items (10 of 220: [0.025, 0.082]), which excludes
    the printed 1/3; it is now Wilson at 1/3 with the nested mean's effective number of items (Kish's)."""
    cells = {("a", "document_rank_order", "d"): [1] * 10, ("b", "document_rank_order", "d"): [0] * 105,
             ("c", "document_rank_order", "d"): [0] * 105}
    row = table1.table1(items_of(cells), n_boot=50).set_index(["model", "facet"]).loc[("panel mean",
                                                                                        "document_rank_order")]
    assert row["flip"] == pytest.approx(1 / 3) and row["n_items"] == 220
    assert row["flip_lo"] <= row["flip"] <= row["flip_hi"]
    weights = [1 / 30] * 10 + [1 / 315] * 210  # each item's share of the mean of the three models' means
    n_eff = sum(weights) ** 2 / sum(w * w for w in weights)
    lo, hi = wilson_interval(np.array(n_eff / 3), np.array(n_eff))
    assert (row["flip_lo"], row["flip_hi"]) == pytest.approx((float(lo), float(hi)))
