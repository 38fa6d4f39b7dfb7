"""The attack tables name each victim and whether it is the paper's model or a relative (issue 31.5); the
paper's values line up by victim (its paper model), not only by architecture family."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from test_report import grid, write_grid

from facet_probe.attack import paper_values
from facet_probe.attack.tables import main

ROOT = Path(__file__).resolve().parents[2]
BLIP = {"_target_": "facet_probe.runners.hf.blip2.InstructBlipRunner", "name": "instructblip_vicuna_7b"}


def test_every_victim_row_names_a_model_config_and_a_paper_model_with_a_relation():
    rows = paper_values.read_values("victims.csv")
    assert {r["model"]: r["relation"] for r in rows} == {
        "llava15_7b": "relative", "instructblip_vicuna_7b": "relative", "minigpt4_vicuna_7b": "paper",
        "minigpt4_vicuna_13b": "paper", "idefics_9b_instruct": "relative", "tiny_vlm": "none"}
    table1 = {r["paper_model"] for r in paper_values.read_values("table1.csv")}
    families = {r["family"] for r in paper_values.read_values("table1.csv")}
    for r in rows:
        assert (ROOT / "facet_probe" / "conf" / "model" / f"{r['model']}.yaml").is_file(), r["model"]
        assert r["relation"] in paper_values.RELATIONS and r["note"]
        assert (r["paper_model"] in table1) == (r["relation"] != "none") and r["paper_family"] in families


@pytest.mark.parametrize(("model", "config", "described", "paper_rows"), [
    ("instructblip_vicuna_7b", BLIP, "instructblip_vicuna_7b (relative of MiniGPT4-7B, not the paper's model)",
     ["| paper: MiniGPT4-7B / scienceqa | 66.28"]),
    ("minigpt4_vicuna_7b", BLIP, "minigpt4_vicuna_7b (the paper's MiniGPT4-7B)", ["| paper: MiniGPT4-7B / scienceqa"]),
    ("minigpt4_vicuna_13b", BLIP, "minigpt4_vicuna_13b (the paper's MiniGPT4-13B)",
     ["| paper: MiniGPT4-13B / scienceqa | 63.64"]),
    ("llava15_7b", {"_target_": "facet_probe.runners.hf.llava.LlavaRunner"},
     "llava15_7b (relative of LLaVA, not the paper's model)", ["| paper: LLaVA / scienceqa | 83.17"]),
    ("tiny_vlm", {"_target_": "facet_probe.runners.hf.llava.LlavaRunner"}, "tiny_vlm (not a paper model)",
     ["| paper: LLaVA / scienceqa"]),
])
def test_table1_names_the_victim_and_lines_the_papers_row_up_by_victim(tmp_path, model, config, described,
                                                                       paper_rows):
    group = write_grid(tmp_path / "g", grid(), model_config=config, model=model)
    assert main([str(group)]) == 0
    text = (group / "table1.md").read_text()
    assert f"| ours: {described} / scienceqa |" in text
    papers = [ln for ln in text.splitlines() if ln.startswith("| paper:")]
    assert len(papers) == len(paper_rows) and all(p.startswith(w) for p, w in zip(papers, paper_rows, strict=True))
    other = "MiniGPT4-7B" if model == "minigpt4_vicuna_13b" else "MiniGPT4-13B"
    assert f"paper: {other}" not in text  # same family, another model: not this victim's row
    assert f"Victim: {model} is" in text
    with (group / "table1.csv").open() as fh:
        ours = [r for r in csv.DictReader(fh) if r["model"] == model]
    assert {r["victim_relation"] for r in ours} == {paper_values.victim_of(model).relation}
    table2 = (group / "table2.md").read_text()
    assert f", {described} on scienceqa" in table2.splitlines()[0] and f"Victim: {model} is" in table2
    figure7 = (group / "figure7.md").read_text()
    assert f"Victim: {model} is" in figure7 and "| paper: " in figure7  # Figure 7: one bar group per family


def test_an_unlisted_model_falls_back_to_its_runners_family_and_says_so(tmp_path):
    group = write_grid(tmp_path / "g", grid())
    assert main([str(group)]) == 0
    text = (group / "table1.md").read_text()
    assert "| ours: m (not a paper model (not in victims.csv)) / scienceqa |" in text
    assert "the paper's rows shown are those of its architecture family (llava)" in text.lower()
