"""Prompt mitigations (`prompt.mitigation=<name>`) and `table-prompt-mitigation`: the instruction reaches only
the system text, is recorded with each trial, is re-rendered by re-scoring and the explorer, and the target's
per-cell and per-modality numbers match hand-computed ones."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.audit.mitigation import load_mitigation
from facet_probe.core.items import Item
from facet_probe.core.prompts import PromptMode, with_instruction
from facet_probe.facets.option_order import OptionOrder
from facet_probe.paper import published
from facet_probe.paper.mitigation import mitigation_cells, modality_means, with_paper_cta
from facet_probe.report.explorer.seen import EXACT, Seen
from facet_probe.scoring.rescore import rescore
from facet_probe.scoring.run_trials import read_run
from facet_probe.store.reading import read_items
from tests.paper.test_paper_app import app

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """experiment=prompt_mitigation (text and visual cells) without and with one of our instructions."""
    root = tmp_path_factory.mktemp("mitigation")
    proc = app("facet_probe", "-m", "experiment=prompt_mitigation", "model=always_first", "limit=4",
               "prompt.mitigation=null,order_invariant", "progress=false", f"hydra.sweep.dir={root}")
    assert proc.returncode == 0, proc.stderr
    return root


def run_of(sweep: Path, mitigation: str) -> Path:
    (folder,) = [p for p in sweep.glob("always_first/prompt_mitigation/*") if p.name.endswith(f"mitigation={mitigation}")]
    return folder


def mcq_trials(folder: Path) -> pd.DataFrame:
    trials = read_run(folder).trials
    return trials[trials["dataset"] == "synthetic_mcq"].reset_index(drop=True)


def items_of(folder: Path) -> dict[str, Item]:
    lines = (folder / "items.jsonl").read_text().splitlines()
    return {(it := Item.model_validate(json.loads(ln))).item_id: it for ln in lines if ln.strip()}


def test_a_mitigation_run_differs_from_its_baseline_only_in_the_system_text(sweep):
    text = load_mitigation("order_invariant").instruction
    base_dir, mit_dir = run_of(sweep, "null"), run_of(sweep, "order_invariant")
    keys = ["item_id", "ordering_idx", "repeat_idx"]
    base, mit = (mcq_trials(d).set_index(keys).sort_index() for d in (base_dir, mit_dir))
    assert len(base) == len(mit) == 4 * 6
    assert base["instruction"].isna().all() and (mit["instruction"] == text).all()  # recorded with each trial
    assert (base["raw_output"] == mit["raw_output"]).all()  # a reference policy ignores the system text
    assert not (base["prompt_hash"] == mit["prompt_hash"]).any()  # other calls: other call keys
    items, facet = items_of(mit_dir), OptionOrder()
    for (item_id, _, _), row in mit.iterrows():
        plain = facet.render(items[item_id], tuple(row["permutation"]), PromptMode.DIRECT)
        mitigated = with_instruction(plain, row["instruction"])
        assert plain.hash == base.loc[(item_id, row.name[1], row.name[2]), "prompt_hash"]
        assert mitigated.hash == row["prompt_hash"]
        assert mitigated.system == f"{plain.system}\n\n{text}" and mitigated.messages == plain.messages


def test_rescoring_and_the_explorer_rerender_the_mitigated_prompt(sweep, tmp_path):
    folder = run_of(sweep, "order_invariant")
    trials = mcq_trials(folder)
    stale = trials.assign(scorer_version=None, correct=None)  # as an older scorer left them
    again = rescore(stale, read_items([folder / "items.jsonl"]))
    assert again["correct"].tolist() == trials["correct"].tolist()  # every trial's prompt rebuilt exactly
    row, item = trials.iloc[0], items_of(folder)[trials.iloc[0]["item_id"]]
    assert Seen(tmp_path).add(row["prompt_hash"], "option_order", item, row["permutation"], "direct",
                              row["instruction"]) == EXACT
    assert Seen(tmp_path).add(row["prompt_hash"], "option_order", item, row["permutation"], "direct") != EXACT


def test_table_prompt_mitigation_pairs_the_runs_per_cell_text_and_visual(sweep, tmp_path):
    proc = app("facet_probe.paper", f"input={sweep}", f"out={tmp_path}", "target=table-prompt-mitigation",
               "bootstrap=50")
    assert proc.returncode == 0, proc.stderr
    cells = pd.read_csv(tmp_path / "table_prompt_mitigation_cells.csv").set_index("dataset")
    assert cells.loc["synthetic_mcq", "modality"] == "text" and cells.loc["synthetic_visual_mcq", "modality"] == "visual"
    assert cells.loc["synthetic_image_set", "modality"] == "visual" and cells.loc["synthetic_evidence", "modality"] == "text"
    assert (cells["n_items"] == 4).all() and (cells["mitigation"] == "order_invariant").all()
    assert (cells["flip_difference"] == 0).all() and (cells["accuracy_difference"] == 0).all()  # same answers
    means = pd.read_csv(tmp_path / "table_prompt_mitigation.csv").set_index("modality")
    assert means.loc["all", "n_cells"] == 4 and means.loc["visual", "n_cells"] == 2
    assert (tmp_path / "table_prompt_mitigation.tex").read_text().count("\\caption{") == 1


def toy_items() -> pd.DataFrame:
    """Two cells (text t, visual v), items answered under no mitigation and under `m`, flips and accuracy set."""
    rows = []
    for dataset, flips_base, flips_m, acc_base, acc_m in (
            ("t", [1, 1, 0, 0], [1, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 0]),
            ("v", [1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0])):
        for setting, flips, acc in (("none", flips_base, acc_base), ("m", flips_m, acc_m)):
            rows += [{"model": "x", "facet": "option_order", "dataset": dataset, "item_id": f"{dataset}::{i}",
                      "setting": setting, "flip": f, "accuracy": a} for i, (f, a) in enumerate(zip(flips, acc, strict=True))]
    return pd.DataFrame(rows)


def test_the_mitigation_table_on_toy_items_matches_hand_computed_numbers():
    cells = mitigation_cells(toy_items(), {"t": "text", "v": "visual"}, n_boot=200, seed=0).set_index("dataset")
    # t: flip 2/4 -> 1/4, accuracy 2/4 -> 3/4; v: flip 4/4 -> 2/4, accuracy 0 -> 1/4
    assert cells.loc["t", ["flip_baseline", "flip_mitigation", "flip_difference"]].tolist() == [0.5, 0.25, -0.25]
    assert cells.loc["v", ["accuracy_baseline", "accuracy_mitigation", "accuracy_difference"]].tolist() == [0, 0.25, 0.25]
    assert cells.loc["v", "flip_difference"] == -0.5 and cells.loc["v", "modality"] == "visual"
    for c in ("flip_difference", "accuracy_mitigation"):
        assert (cells[f"{c}_lo"] <= cells[c]).all() and (cells[c] <= cells[f"{c}_hi"]).all()
    means = modality_means(cells.reset_index()).set_index("modality")
    assert means.loc["all", "flip_difference"] == pytest.approx(-0.375)  # (-0.25 - 0.5) / 2, cells unweighted
    assert means.loc["text", "accuracy_difference"] == 0.25 and means.loc["all", "n_cells"] == 2


def test_an_unknown_mitigation_names_the_valid_ones(tmp_path):
    proc = app("facet_probe", "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=2",
               "prompt.mitigation=be_nice", "progress=false", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2 and "order_invariant" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_the_papers_cta_values_sit_beside_a_matching_model_and_dataset():
    ours = pd.DataFrame([{"model": "gemini_3_flash", "dataset": "mmlu_pro", "flip_difference": -0.05},
                         {"model": "gemini_3_flash", "dataset": "commonsense_qa", "flip_difference": 0.0},
                         {"model": "gemini_3_flash", "dataset": "synthetic_mcq", "flip_difference": 0.0}])
    out = with_paper_cta(ours, published.read("cta_flip_summary.csv"), published.model_names()).set_index("dataset")
    assert (out.loc["mmlu_pro", "paper_baseline_flip"], out.loc["mmlu_pro", "paper_cta_flip"]) == (0.12, 0.1)
    assert out.loc["mmlu_pro", "flip_difference_minus_paper"] == pytest.approx(-0.05 - -0.02)
    assert pd.isna(out.loc["synthetic_mcq", "paper_cta_flip"])
    csqa = published.read("cta_flip_summary.csv").query("dataset_id == 'commonsenseqa' and model == 'gemini-3-flash-preview'")
    assert out.loc["commonsense_qa", "paper_cta_flip"] == csqa["cta_flip_rate"].item()  # the release's "commonsenseqa"
