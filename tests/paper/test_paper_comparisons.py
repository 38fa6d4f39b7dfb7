"""Issue 39, points 5, 15 and 18: what a reader of the paper tables sees must not mislead. `verify` needs no
run folders; an oracle is never on the cost front and an abstaining policy is placed at its all-items accuracy;
the paper's Table 4 values are printed only where model, facet and dataset match."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facet_probe import api
from facet_probe.core.errors import ConfigError
from facet_probe.paper import pareto, policies, published

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)


def test_verify_reads_the_published_data_without_an_input(tmp_path):
    result = api.paper(["target=verify", f"out={tmp_path}"])
    assert result["verify"]["ok"].all() and len(result["verify"]) > 100


def test_a_target_that_reads_run_folders_asks_for_input_in_one_line(tmp_path):
    for target in ("table1", "paper"):
        with pytest.raises(ConfigError, match=rf"target={target} needs input=.*only target=verify reads the published"):
            api.paper([f"target={target}", f"out={tmp_path}"])


def test_the_oracles_are_declared_on_the_policy():
    assert [p.id for p in policies.POLICIES if p.oracle] == ["P5", "P6"]
    assert [p.id for p in policies.POLICIES if p.abstains] == ["P2"]


def test_the_front_leaves_out_oracles_and_places_an_abstaining_policy_at_its_all_items_accuracy():
    means = pd.DataFrame({
        "policy": ["P1", "P2", "P3", "P6"], "oracle": [False, False, False, True],
        "calls_per_item": [1, 2, 3, 6],
        "accuracy": [0.60, 0.79, 0.65, 0.90],  # P2: over the items it answers (coverage 0.7)
        "coverage": [1.0, 0.7, 1.0, 1.0], "all_items_accuracy": [0.60, 0.553, 0.65, 0.90]})
    assert pareto.policy_front(means).tolist() == [True, False, True, False]
    # without the oracle's point the runnable front is the same: an oracle never pushes a policy off it
    assert pareto.policy_front(means.iloc[:3]).tolist() == [True, False, True]


def test_every_policy_has_a_coverage_and_an_all_items_accuracy():
    from tests.paper.test_mitigation_policies import item_table

    table = policies.policy_table(item_table()).set_index("policy")
    assert table.loc["P1", "coverage"] == 1.0 and table.loc["P1", "all_items_accuracy"] == table.loc["P1", "accuracy"]
    assert table.loc["P2", "all_items_accuracy"] == pytest.approx(1 / 3) and table.loc["P2", "accuracy"] == 1.0
    assert table.loc[["P5", "P6"], "oracle"].all() and not table.loc[["P1", "P2", "P3", "P4"], "oracle"].any()


def test_the_papers_cell_value_only_where_model_facet_and_dataset_match():
    ours = pd.DataFrame({"model": ["gemini_3_flash", "gemini_3_flash", "tiny_vlm"],
                         "facet": ["option_order", "option_order", "option_order"],
                         "dataset": ["commonsense_qa", "synthetic_mcq", "commonsense_qa"],
                         "policy": ["P1", "P1", "P1"], "accuracy": [0.8, 0.7, 0.9], "subsets": "all"})
    out = published.beside_policy_cells(ours)
    # the release names CommonsenseQA `commonsenseqa`; ours is `commonsense_qa` (assets/reference_ids.csv)
    assert out.loc[0, "paper_accuracy"] == pytest.approx(0.8758333, abs=1e-6)
    assert out.loc[0, "paper_difference"] == pytest.approx(0.8 - 0.8758333, abs=1e-6)
    assert out.loc[[1, 2], ["paper_accuracy", "paper_difference"]].isna().all().all()
    assert out.loc[1, "paper_population"].startswith("no matching population")
    assert out.loc[0, "paper_population"].startswith("the paper's cell")


def release_as_ours() -> pd.DataFrame:
    """The paper's 26 Table 4 cells as if they were our policy table (our values = the paper's)."""
    cells = published.policy_cells()
    labels = {p.id: p for p in policies.POLICIES}
    return cells.assign(
        label=cells["policy"].map(lambda p: labels[p].label), oracle=cells["policy"].map(lambda p: labels[p].oracle),
        accuracy=cells["paper_accuracy"], coverage=cells["paper_coverage"],
        all_items_accuracy=cells["paper_all_items_accuracy"], delta_vs_p1=np.nan,
        calls_per_item=cells["policy"].map(lambda p: labels[p].calls), tokens_per_item=np.nan, subsets="all",
    ).drop(columns=["paper_accuracy", "paper_coverage", "paper_all_items_accuracy"])


def test_over_the_papers_own_cells_the_matched_means_are_its_table4():
    table = release_as_ours()
    cells = published.beside_policy_cells(table)
    means = published.beside_policy_means(policies.policy_means(table), cells).set_index("policy")
    paper = published.read("policy_means.csv").assign(policy=lambda d: d["policy_id"].str.split("_").str[0])
    paper = paper.set_index("policy")
    assert means["paper_accuracy"].to_dict() == pytest.approx(paper["mean_accuracy"].to_dict())
    assert means.loc["P2", "paper_coverage"] == pytest.approx(paper.loc["P2", "coverage"])
    assert means.loc["P2", "paper_all_items_accuracy"] == pytest.approx(
        paper.loc["P2", "all_items_accuracy_abstention_incorrect"])
    assert (means["n_cells_matched"] == 26).all()
    assert means["paper_difference"].abs().max() < 1e-12
    # one cell fewer: the paper's value is its mean over the 25 shared cells, not its Table 4 mean
    fewer = published.beside_policy_cells(table[table["dataset"] != "mt_eval"].iloc[1:])
    part = published.beside_policy_means(policies.policy_means(table), fewer).set_index("policy")
    assert part.loc["P1", "n_cells_matched"] == 23
    assert part.loc["P1", "paper_accuracy"] != pytest.approx(paper.loc["P1", "mean_accuracy"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two reference policies on one cell: always_first (its two first orderings often disagree) and oracle."""
    root = tmp_path_factory.mktemp("runs")
    for model in ("always_first", "oracle"):
        api.audit([f"model={model}", "facet=option_order", "dataset=synthetic_mcq", "limit=8", "progress=false",
                   f"hydra.run.dir={root / model}"])
    return root


def test_table4_prints_no_paper_value_for_a_population_the_paper_does_not_have(runs, tmp_path):
    api.paper([f"input={runs}", "target=table4-mitigation", f"out={tmp_path}", "bootstrap=20"])
    means = pd.read_csv(tmp_path / "table4_mitigation.csv")
    assert means["paper_accuracy"].isna().all() and means["paper_difference"].isna().all()
    assert means["paper_population"].str.startswith("no matching population").all()
    assert "no matching population" in (tmp_path / "table4_mitigation.tex").read_text()
    cells = pd.read_csv(tmp_path / "table4_mitigation_cells.csv")
    assert cells["paper_difference"].isna().all()
    assert (cells["subsets"] == "all").all()  # the paper's rule unless mitigation.subsets says otherwise
    assert "every pair / triple" in (tmp_path / "table4_mitigation.tex").read_text()


def test_ours_is_one_setting_away_and_says_so(runs, tmp_path):
    api.paper([f"input={runs}", "target=table4-mitigation", f"out={tmp_path}", "mitigation.subsets=first"])
    cells = pd.read_csv(tmp_path / "table4_mitigation_cells.csv")
    assert (cells["subsets"] == "first").all()
    assert cells.loc[cells["policy"].isin(["P2", "P3"]), "paper_population"].str.contains("not the paper's").all()
    assert "orderings 0-1" in (tmp_path / "table4_mitigation.tex").read_text()
    assert "not the paper's detector" in (tmp_path / "table4_detector.tex").read_text()


def test_fig_pareto_keeps_oracles_off_the_front_and_places_p2_over_all_items(runs, tmp_path):
    api.paper([f"input={runs}", "target=fig-pareto", f"out={tmp_path}", "bootstrap=20"])
    points = pd.read_csv(tmp_path / "pareto_points.csv").set_index("policy")
    assert points.loc[["P5", "P6"], "oracle"].all() and not points.loc[["P5", "P6"], "on_front"].any()
    assert points.loc["P2", "coverage"] < 1  # always_first's first two orderings disagree on some items
    runnable = points[~points["oracle"]]
    for policy, r in runnable.iterrows():  # the front is the runnable policies' at their all-items accuracy
        beaten = runnable.drop(index=policy)
        dominated = ((beaten["calls_per_item"] <= r["calls_per_item"])
                     & (beaten["all_items_accuracy"] >= r["all_items_accuracy"])
                     & ((beaten["calls_per_item"] < r["calls_per_item"])
                        | (beaten["all_items_accuracy"] > r["all_items_accuracy"]))).any()
        assert r["on_front"] == (not dominated), policy
    tex = (tmp_path / "pareto_points.tex").read_text()
    assert "accuracy over all items" in tex and "never on the front" in tex
    assert (tmp_path / "fig_pareto.png").stat().st_size > 0


def test_a_caption_prints_verbatim_in_latex(tmp_path):
    """Found beside point 14: a caption's `%` (every "95% interval") began a LaTeX comment that swallowed the
    rest of the caption and its closing brace; `<`, `>` and `|` print as other glyphs in LaTeX's default font."""
    from facet_probe.paper import render

    render.write_table(pd.DataFrame({"a": [1]}), tmp_path, "t", "95% intervals; R-hat > 1.01, |delta| & a_b")
    caption = next(line for line in (tmp_path / "t.tex").read_text().splitlines() if line.startswith("\\caption"))
    assert caption == (r"\caption{95\% intervals; R-hat \textgreater{} 1.01, \textbar{}delta\textbar{} \& a\_b}")
