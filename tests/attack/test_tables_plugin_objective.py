"""A plug-in objective in a user folder reaches every table under its own name (issue 39, points 6, 7, 8, 11, 17).

The user folder is `tests/attack/plugins/` (modules on the Python path, `conf/` on Hydra's search path):
`option_margin.OptionMargin` (a margin over every option letter, setting `kappa`, written from docs/plugins.md
alone) and `toy_objective.LetterMargin`. Runs go through the attack app in-process (`facet_probe.api.attack`) on
the shipped tiny VLM with a few PGD steps; the paper app's attack tables are built from the same folders.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers import samples

from facet_probe import api
from facet_probe.attack.objectives import AnswerObjective
from facet_probe.attack.spans import SpanError
from facet_probe.core.prompts import PromptMode

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

PLUGINS = Path(__file__).resolve().parent / "plugins"
FAST = ["attack.steps=2", "attack.update_every=2", "max_new_tokens=32", f"hydra.searchpath=[file://{PLUGINS}/conf]"]
BUDGET = "eps16-a1-s2-u2"


@pytest.fixture(scope="module")
def user_folder():
    """The plug-ins' modules importable, as `PYTHONPATH=<dir>` makes them for the command line."""
    sys.path.insert(0, str(PLUGINS))
    yield PLUGINS
    sys.path.remove(str(PLUGINS))


def attack(out: Path, *overrides: str) -> Path:
    return api.attack([f"out_root={out}", *FAST, *overrides]).run_dir


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def grid(user_folder, tmp_path_factory) -> Path:
    """One budget folder: no attack on 2 items, the answer attack and the toy plug-in on 3 (item 3 is missing
    from the no-attack run)."""
    out = tmp_path_factory.mktemp("plugin_grid")
    attack(out, "attack=none", "limit=2")
    attack(out, "attack=answer", "limit=3")
    run = attack(out, "attack=letter_margin", "limit=3")
    return run.parent


def test_a_plugin_objective_has_columns_of_its_own_name_in_every_table(grid):
    """Point 6: the tables come from the objectives present, not from the paper's three attacks."""
    table = (grid / "table.md").read_text()
    head = next(ln for ln in table.splitlines() if ln.startswith("| | w/ CoT: no attack"))
    assert head.split(" | ")[1:] == ["w/ CoT: no attack", "w/ CoT: answer attack", "w/ CoT: letter_margin |"]
    assert "clean pass of the letter_margin run" not in table  # the no-attack column is the none run
    runs = {r["attack"]: r for r in read_csv(grid / "table.csv")}
    assert set(runs) == {"none", "answer", "letter_margin"} and runs["letter_margin"]["n"] == "3"
    table1 = (grid / "table1.md").read_text()
    assert "| | w/ CoT: no attack | w/ CoT: answer attack | w/ CoT: letter_margin |" in table1
    assert {r["attack"] for r in read_csv(grid / "table1.csv") if r["model"] == "tiny_vlm"} == {
        "none", "answer", "letter_margin"}
    assert "| letter_margin |" in (grid / "table2.md").read_text()


def test_the_run_table_and_the_one_population_table_point_at_each_other_and_name_the_missing_item(grid):
    """Point 11: table.md counts each run on its own items, table1.md on one population; each says where the
    other is, and the population's caption names the item one run lacks and which run."""
    table, table1 = (grid / "table.md").read_text(), (grid / "table1.md").read_text()
    assert "`table1.md` beside this table scores every column on one population" in table
    assert "Each run is scored on its own items" in table
    assert "each run scored on its own items: `table.md` beside this table" in table1
    assert "synthetic_visual_mcq::test-00002 (not in w/ CoT: no attack)" in table1


def test_the_option_letters_ids_reach_prepare_and_loss_through_the_contract(user_folder, llava):
    """Point 7: `Forced.answer_ids` holds every displayed option letter's token in the letter slot, so a loss
    over all letters needs no `prepare` of its own."""
    from option_margin import OptionMargin  # the user folder's module

    sample = samples(1)[0]
    objective = OptionMargin(kappa=1.0)
    forced = objective.prepare(llava, sample, f"It is round. The answer is ({sample.gold}).")
    assert set(forced.answer_ids) == set(sample.labels) and len(set(forced.answer_ids.values())) == len(sample.labels)
    logits = torch.zeros(len(forced.positions), len(llava.tokenizer))
    loss, parts = objective.loss(forced, logits, sample)
    assert parts["letters"] == len(sample.labels) and float(loss) == 0.0  # all letters tie: margin 0
    # this tokenizer writes "Answer: C" with " C" but "Answer: B" with " ", "B": B cannot share the slot. An
    # objective that needs every letter does not attack such a sample (a SpanError: recorded as its reason);
    # the answer attack, which reads the gold letter only, still does
    direct = replace(samples(1, PromptMode.DIRECT)[0], gold="C")
    with pytest.raises(SpanError, match="re-tokenises"):
        objective.prepare(llava, direct, "Answer: C")
    assert "B" not in AnswerObjective().prepare(llava, direct, "Answer: C").answer_ids


def test_a_sweep_over_a_plugin_setting_gets_a_folder_per_value(user_folder, tmp_path):
    """Point 8: `attack.objective.kappa=0,1` names a folder per value (the settings that differ from the
    objective's defaults, spelt as the audit spells an override); both run and both reach the tables."""
    from hydra import compose, initialize_config_module

    from facet_probe.attack.config import register

    register()
    names = []
    for kappa in (0, 1):
        with initialize_config_module("facet_probe.conf", version_base="1.3"):
            cfg = compose("attack_app", overrides=["attack=option_margin", f"attack.objective.kappa={kappa}", *FAST])
        names.append(cfg.run_name)
    base = f"tiny_vlm/synthetic_visual_mcq/{BUDGET}/option_margin-cot"
    assert names == [base, base + "_attack.objective.kappa=1.0"]

    runs = [attack(tmp_path, "attack=option_margin", f"attack.objective.kappa={k}", "limit=2") for k in (0, 1)]
    assert [r.name for r in runs] == ["option_margin-cot", "option_margin-cot_attack.objective.kappa=1.0"]
    for run, kappa in zip(runs, (0.0, 1.0), strict=True):
        assert json.loads((run / "attack_settings.json").read_text())["objective"]["kappa"] == kappa
        rows = [json.loads(ln) for ln in (run / "results.jsonl").read_text().splitlines()]
        attacked = [r for r in rows if r["attacked"]]
        assert len(rows) == 2 and attacked and not any(r.get("error") for r in rows)
        assert all(r["curve"]["letters"] == [4.0] * r["steps_run"] for r in attacked)  # every letter compared
    head = next(ln for ln in (runs[0].parent / "table.md").read_text().splitlines() if ln.startswith("| | "))
    assert head == "| | w/ CoT: no attack | w/ CoT: option_margin | w/ CoT: option_margin (kappa=1.0) |"


def test_the_paper_apps_attack_tables_show_the_plugin_name_the_budget_and_annotate_no_success(grid, tmp_path):
    """Point 17 (part): `attack_table2` was all zeros with no note and its `budget` column held a folder path.
    On the tiny VLM no attack succeeds in 2 steps, so there is no rationale change to count: the shares are
    empty, not 0, and a note says why; `budget` is the budget's label in every table."""
    from facet_probe.paper.attack_tables import attack_tables

    attack_tables([grid.parent.parent.parent], tmp_path)
    for name in ("attack_table1", "attack_table2", "attack_runs"):
        rows = read_csv(tmp_path / f"{name}.csv")
        assert {r["budget"] for r in rows if not r["model"].startswith("paper:")} == {BUDGET}, name
    runs = read_csv(tmp_path / "attack_runs.csv")
    assert {r["attack"] for r in runs} == {"none", "answer", "letter_margin"}
    assert {(r["model"], r["dataset"]) for r in runs} == {("tiny_vlm", "synthetic_visual_mcq")}
    table2 = {r["attack"]: r for r in read_csv(tmp_path / "attack_table2.csv")}
    assert set(table2) == {"answer", "letter_margin"}
    for r in table2.values():
        assert r["successes"] == "0" and int(r["attacked"]) > 0
        assert r["changed_mechanical_share"] == "" and "no successful attack" in r["note"]
    assert "no successful attack" in (tmp_path / "attack_table2.tex").read_text()  # the caption says so
