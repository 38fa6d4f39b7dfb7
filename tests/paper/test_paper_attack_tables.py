"""`attack-tables`: the attack app's Table 1 (one population) and Table 2 of a hand-written toy grid, through
`python -m facet_probe.paper`, with counts computed by hand and the paper's row beside ours."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from facet_probe.attack.tables import summarize
from tests.paper.test_paper_app import app

LLAVA = {"_target_": "facet_probe.runners.hf.llava.LlavaRunner", "name": "m"}


def row(item, *, clean_correct=True, selected=True, attacked=False, adv_correct=None, rat="It is red.", adv_rat=None):
    r = {"sample_id": item, "item_id": item, "selected": selected,
         "selection_reason": "correct" if selected else "wrong_answer", "clean_correct": clean_correct,
         "clean_answer": "A", "attacked": attacked, "success": attacked and not adv_correct, "labels": ["A", "B"],
         "options": ["red", "blue"], "question": "Which?", "clean_rationale": rat, "clean_answer_first": False}
    if attacked:
        adv = adv_rat or rat
        r |= {"adv_correct": adv_correct, "adv_answer": "A" if adv_correct else "B", "adv_rationale": adv,
              "rationale_changed": adv != rat, "adv_answer_first": False, "linf_255": 16.0, "steps_run": 3,
              "stopped_early": False}
    return r


def write_group(folder: Path) -> Path:
    """a, b, c: c is wrong with CoT (out of the population); with CoT the answer attack flips a (rationale
    changed) and not b; without CoT the answer attack flips a and b."""
    grid = {("cot", "answer"): [row("a", attacked=True, adv_correct=False, adv_rat="It is blue."),
                                row("b", attacked=True, adv_correct=True), row("c", clean_correct=False, selected=False)],
            ("direct", "answer"): [row("a", attacked=True, adv_correct=False), row("b", attacked=True, adv_correct=False),
                                   row("c", attacked=True, adv_correct=False)]}
    for (mode, attack), rows in grid.items():
        run = folder / f"{attack}-{mode}"
        run.mkdir(parents=True)
        (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        meta = {"model": "m", "dataset": "scienceqa", "attack": attack, "mode": mode, "eps_255": "16",
                "alpha_255": "1", "steps": 3, "update_every": 1}
        (run / "summary.json").write_text(json.dumps(summarize(rows, meta)))  # as the attack app writes it
        (run / "attack_settings.json").write_text(json.dumps({**meta, "model_config": LLAVA}))
    return folder


def test_attack_tables_writes_the_attack_apps_tables_beside_the_other_targets(tmp_path):
    write_group(tmp_path / "attack" / "m" / "scienceqa" / "eps16")
    proc = app("facet_probe.paper", f"input={tmp_path / 'attack'}", f"out={tmp_path / 'out'}", "target=attack-tables")
    assert proc.returncode == 0, proc.stderr
    t1 = pd.read_csv(tmp_path / "out" / "attack_table1.csv")
    ours = t1[t1["model"] == "m"].set_index(["mode", "attack"])
    assert set(ours["population"]) == {2}  # a and b: c was answered wrongly with CoT
    # by hand on {a, b}: w/ CoT answer attack leaves b right (1/2), succeeds on a (1 of 2 attacked)
    assert (ours.loc[("cot", "answer"), "correct"], ours.loc[("cot", "answer"), "successes"]) == (1, 1)
    assert (ours.loc[("direct", "answer"), "correct"], ours.loc[("direct", "answer"), "successes"]) == (0, 2)
    assert ours.loc[("cot", "none"), "accuracy"] == 1.0
    assert t1["model"].str.startswith("paper:").any()  # LLaVA x scienceqa is in the paper's Table 1
    t2 = pd.read_csv(tmp_path / "out" / "attack_table2.csv").set_index("attack")
    assert (t2.loc["answer", "successes"], t2.loc["answer", "changed_mechanical"]) == (1, 1)
    assert (tmp_path / "out" / "attack_runs.csv").is_file() and (tmp_path / "out" / "attack_table1.tex").is_file()
    assert not (tmp_path / "attack" / "m" / "scienceqa" / "eps16" / "table1.md").exists()  # inputs left as they were


def test_attack_tables_without_attack_runs_says_what_to_run(tmp_path):
    proc = app("facet_probe.paper", f"input={tmp_path}", f"out={tmp_path / 'out'}", "target=attack-tables")
    assert proc.returncode == 2 and "no attack run under the inputs" in proc.stderr and "Traceback" not in proc.stderr
