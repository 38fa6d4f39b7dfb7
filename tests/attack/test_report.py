"""Table 1 on one population, Table 2 and Figure 7 of a budget folder, on a toy grid written by hand.

The LLM judge of rationale changes runs through the real google-genai SDK against the loopback fake
provider; the paper's values come from the shipped data files.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from facet_probe.attack.population import population, table1_cells
from facet_probe.attack.rationale_change import Change, heuristic_label
from facet_probe.attack.tables import load_judge, main, write_group_table
from facet_probe_dev.testing.fake_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parents[2]
LLAVA = {"_target_": "facet_probe.runners.hf.llava.LlavaRunner", "name": "m"}
OPTIONS = ["red circle", "blue square"]


def row(item, *, selected=True, reason="correct", clean_correct=True, attacked=False, adv_correct=None,
        success=False, clean_rat="It is round and red.", adv_rat=None, adv_answer=None, error=None):
    r = {"sample_id": item, "item_id": item, "selected": selected, "selection_reason": reason,
         "clean_correct": clean_correct, "clean_answer": "A" if clean_correct else "B", "attacked": attacked,
         "success": success, "labels": ["A", "B"], "options": OPTIONS, "question": "Which shape?",
         "clean_rationale": clean_rat, "clean_answer_first": False}
    if attacked:
        adv_rat = adv_rat if adv_rat is not None else clean_rat
        r |= {"adv_correct": adv_correct, "adv_answer": adv_answer or ("A" if adv_correct else "B"),
              "adv_rationale": adv_rat, "rationale_changed": adv_rat.lower().split() != clean_rat.lower().split(),
              "adv_answer_first": False, "linf_255": 16.0, "steps_run": 10, "stopped_early": False}
    if error:
        r["error"] = error
    return r


def grid() -> dict[tuple[str, str], list[dict]]:
    """i1: in the population; i2: in it, but wrong without CoT; i3: wrong with CoT; i4: no rationale with
    CoT; i5: held by one run only; i6: an attack error."""
    cot_clean = [row("i1"), row("i2"), row("i3", selected=False, reason="wrong_answer", clean_correct=False),
                 row("i4", selected=False, reason="no_rationale")]
    direct = [row("i1", attacked=True, adv_correct=False, success=True),
              row("i2", selected=False, reason="wrong_answer", clean_correct=False), row("i3"), row("i4"),
              row("i6", attacked=True, adv_correct=False, success=True)]
    return {
        ("direct", "answer"): direct,
        ("cot", "answer"): [row("i1", attacked=True, adv_correct=True),
                            row("i2", attacked=True, adv_correct=False, success=True,
                                adv_rat="It is square and blue.")] + cot_clean[2:] + [row("i5"), row("i6", error="x")],
        ("cot", "rationale"): [row("i1", attacked=True, adv_correct=False, success=True, adv_rat="it is ROUND and red."),
                               row("i2", attacked=True, adv_correct=False, success=True,
                                   adv_rat="It is round, I think.")] + cot_clean[2:] + [row("i6")],
    }


def write_grid(folder: Path, runs, model_config=LLAVA, dataset="scienceqa", model="m") -> Path:
    for (mode, attack), rows in runs.items():
        run = folder / f"{attack}-{mode}"
        run.mkdir(parents=True)
        (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        meta = {"model": model, "dataset": dataset, "attack": attack, "mode": mode, "eps_255": "16", "alpha_255": "1",
                "steps": 200, "update_every": 10}
        (run / "summary.json").write_text(json.dumps({**meta, "n": len(rows), "clean_accuracy": 1.0,
                                                      "adv_accuracy": 0.5, "attacked": 1, "successes": 1,
                                                      "success_rate": 1.0, "rationale_changed_share": 1.0,
                                                      "skip_rationale_share": 0.0,
                                                      "clean_skip_rationale_share": 0.0}))
        (run / "attack_settings.json").write_text(json.dumps({**meta, "model_config": model_config}))
    return folder


def test_every_column_is_scored_on_the_items_answered_correctly_with_cot():
    runs = grid()
    pop = population(runs)
    assert pop.items == ("i1", "i2") and pop.candidates == 5  # i5 is not held by every run
    assert pop.missing == {"i5": (("direct", "answer"), ("cot", "rationale"))}  # named, with the runs lacking it
    assert pop.dropped == {"w/ CoT clean reply: wrong_answer": 1, "w/ CoT clean reply: no_rationale": 1,
                           "attack error": 1}
    cells = table1_cells(runs, pop, [("direct", "none"), *runs, ("cot", "none")])
    acc = {k: (c["correct"], c["n"]) for k, c in cells.items()}
    # w/o CoT: i2 was answered wrongly without CoT, so it is wrong in both w/o CoT columns (never attacked)
    assert acc == {("direct", "none"): (1, 2), ("direct", "answer"): (0, 2), ("cot", "none"): (2, 2),
                   ("cot", "answer"): (1, 2), ("cot", "rationale"): (0, 2)}
    assert (cells[("direct", "answer")]["successes"], cells[("direct", "answer")]["attacked"]) == (1, 1)


def test_the_table_command_writes_table1_with_its_rule_and_the_papers_row(tmp_path):
    group = write_grid(tmp_path / "g", grid())
    assert main([str(group)]) == 0
    text = (group / "table1.md").read_text()
    assert "selected in every w/ CoT run" in text and "Here: 2 of 5 items" in text
    ours = next(ln for ln in text.splitlines() if ln.startswith("| ours"))
    assert ours.split(" | ")[1:3] == ["50.0 (1/2)", "0.0 (0/2)"] and "100.0 (2/2)" in ours
    paper = next(ln for ln in text.splitlines() if ln.startswith("| paper: LLaVA / scienceqa"))
    assert "83.17" in paper and "49.27" in paper and "asset/efficiency.png" in text
    assert "22.39" not in paper  # the paper's values of the columns we have: no stop-reasoning run here
    assert "Not held by every run: i5 (not in w/o CoT: answer, w/ CoT: rationale)." in text  # its names: no titles recorded
    assert (group / "table.md").exists()  # the per-run table stays beside it
    other = write_grid(tmp_path / "h", grid(), dataset="synthetic_visual_mcq")
    write_group_table(other)
    assert "none for model family llava x dataset synthetic_visual_mcq" in (other / "table1.md").read_text()


def test_the_heuristic_labels_a_change_key_when_it_touches_the_answers_words():
    base = row("i", attacked=True, adv_correct=False, adv_answer="B")
    assert heuristic_label({**base, "adv_rationale": "it is  ROUND and red."}) == Change.NO_CHANGE
    assert heuristic_label({**base, "adv_rationale": "It is square and blue."}) == Change.KEY  # option B's words
    assert heuristic_label({**base, "adv_rationale": "It is round and red, I think."}) == Change.TRIVIAL


def judge_reply(call) -> str:
    text = call.texts()[-1]
    one, two = re.search(r"Rationale 1 \(original image\):\n(.*?)\n\nRationale 2 \(perturbed image\):\n(.*?)\n\n",
                         text, re.S).groups()
    change = "none" if one.lower().split() == two.lower().split() else "trivial"
    return json.dumps({"changed": change != "none", "change": change})


def read_csv(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_table2_and_figure7_with_a_judge_cached_and_a_hand_label_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "g-judge-test-key-0123456789")
    group = write_grid(tmp_path / "g", grid())
    write_group_table(group)  # offline: the heuristic's labels, and the figure says so
    assert "- (no judge ran)" in (group / "table2.md").read_text()
    assert "heuristic labeller" in (group / "figure7.md").read_text()
    with FakeProviderServer(reply=judge_reply) as server:
        judge = load_judge("gemini_pro", [f"judge.runner.base_url={server.url}"])
        write_group_table(group, judge)
        assert len(server.calls) == 4  # the population's attacked rows with CoT (i1, i2 x answer, rationale)
        write_group_table(group, judge)
        assert len(server.calls) == 4  # cached: nothing is asked twice
    table2 = (group / "table2.md").read_text()
    answer = next(ln for ln in table2.splitlines() if ln.startswith("| answer |"))
    rationale = next(ln for ln in table2.splitlines() if ln.startswith("| rationale |"))
    assert "100.0 (1/1)" in answer  # i2's rationale moved (mechanically and for the judge)
    assert "50.0 (1/2)" in rationale and "50.0 (1/2, gemini_pro)" in rationale  # i1: case only
    labels = read_csv(group / "rationale_labels.csv")
    assert {r["used_from"] for r in labels} == {"llm"}
    # a person corrects one label by hand; a rebuild without the judge keeps it, and the figure reads it
    for r in labels:
        if (r["attack"], r["sample_id"]) == ("answer", "i2"):
            r["label"] = "key"
    with (group / "rationale_labels.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(labels[0]))
        w.writeheader()
        w.writerows(labels)
    write_group_table(group)
    again = {(r["attack"], r["sample_id"]): r for r in read_csv(group / "rationale_labels.csv")}
    assert again[("answer", "i2")]["used"] == "key" and again[("answer", "i2")]["used_from"] == "hand"
    assert again[("rationale", "i2")]["used_from"] == "llm"  # cached judgments are read without a call
    fig = {(r["attack"], r["outcome"]): r for r in read_csv(group / "figure7.csv")}
    assert fig[("answer", "success")]["key"] == "1" and fig[("answer", "failure")]["no_change"] == "1"
    assert "hand" in fig[("answer", "success")]["labels"] and (group / "figure7.png").stat().st_size > 0
    assert "paper: LLaVA, success | 50 | 0 | 0" in (group / "figure7.md").read_text()


def test_the_table_command_refuses_a_missing_folder_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "facet_probe.attack.tables", str(tmp_path / "nope")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2 and "not a folder" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_hand_label_is_one_clear_error(tmp_path):
    group = write_grid(tmp_path / "g", grid())
    write_group_table(group)
    path = group / "rationale_labels.csv"
    rows = read_csv(path)
    rows[0]["label"] = "major"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ValueError, match="label 'major'.*not one of key, trivial, no_change"):
        write_group_table(group)
