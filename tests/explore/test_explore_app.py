"""`python -m facet_probe.explore`: one page over several runs (audit and attack), its data blob, what the
page says when a prompt cannot be recovered exactly, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from facet_probe import api
from facet_probe.metrics.flips import item_metrics
from facet_probe.report.explorer.attack import word_diff
from facet_probe.report.explorer.build import explorer_for_report, explorer_for_runs
from facet_probe.report.explorer.page import read_page
from facet_probe.store.reading import load_trial_frame, read_items
from facet_probe_dev.testing.in_process import run_module

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

#: A FACET-PROBE v0.0.1 trial file (tests/fixtures/README.md): no prompt mode, parsed letter, repeat or trial key.
V001 = Path(__file__).parents[1] / "fixtures" / "reference_v0_0_1" / "trials.jsonl"


def blob_of(page: Path) -> dict:
    """The page's data whole: its index with every item's details from its chunks (inside it or beside it)."""
    return read_page(page)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    for model in ("oracle", "position_biased"):
        done = run_module("facet_probe", f"model={model}", "limit=2", f"out_root={root}", "progress=false")
        assert done.returncode == 0, done.stderr[-2000:]
    return root


def attack_folder(root: Path) -> Path:
    """An attack run folder as facet_probe.attack.outputs writes one: settings, one result row, its images."""
    folder = root / "attack_run"
    (folder / "images").mkdir(parents=True)
    (folder / "attack_settings.json").write_text("{}")
    for name, colour in (("s1_clean.png", "red"), ("s1_adv.png", "blue")):
        Image.new("RGB", (8, 8), colour).save(folder / "images" / name)
    row = {"sample_id": "s1", "item_id": "scienceqa::1", "dataset": "scienceqa", "model": "tiny", "attack": "answer",
           "mode": "cot", "labels": ["A", "B"], "gold": "A", "target": None, "attacked": True, "success": True,
           "rationale_changed": True, "linf_255": 8.0, "clean_output": "The sky is blue. The answer is (A).",
           "clean_answer": "A", "clean_rationale": "The sky is blue.", "clean_correct": True,
           "adv_output": "The sky is red. The answer is (B).", "adv_answer": "B", "adv_rationale": "The sky is red.",
           "adv_correct": False, "images": {"clean": ["images/s1_clean.png"], "adv": ["images/s1_adv.png"]}}
    (folder / "results.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_one_page_over_two_audits_and_an_attack(runs, tmp_path):
    attack = attack_folder(runs)
    out = tmp_path / "page"
    done = run_module("facet_probe.explore", f'input=["{runs}"]', f"out={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    blob = blob_of(out / "explorer.html")
    assert {r["kind"] for r in blob["runs"]} == {"audit", "attack"} and len(blob["runs"]) == 3
    assert all(set(it["models"]) == {"oracle", "position_biased"} for it in blob["items"])
    assert len(blob["items"]) == 12  # 6 cells x 2 items, both models under one entry per item
    assert blob["recovery"]["differs"] == 0 and blob["recovery"]["unavailable"] == 0
    # images once: one data URI per distinct image, however many orderings show it
    html = (out / "explorer.html").read_text()
    assert html.count("data:image/png;base64,") == len(blob["images"])
    models = {m for r in blob["runs"] if r["kind"] == "audit" for m in r["provenance"]["models"]}
    assert models == {"oracle", "position_biased"}

    (sample,) = blob["attack"]
    assert sample["rationale_diff"] == [["=", "The sky is"], ["-", "blue."], ["+", "red."]]
    for side in ("clean", "adv"):
        (src,) = sample[side]["images"]
        assert (out / src).resolve() == (attack / "images" / f"s1_{side}.png").resolve()


def test_a_prompt_that_no_longer_renders_the_same_is_marked(runs, tmp_path):
    folder = next(runs.glob("oracle/offline/*"))
    trials = load_trial_frame(folder)
    trials.loc[0, "prompt_hash"] = "0000000000000000"  # as if the facet's wording had changed since the run
    page = explorer_for_report(tmp_path, trials, read_items([folder / "items.jsonl"]), item_metrics(trials), "t")
    blob = blob_of(page)
    assert blob["recovery"]["differs"] == 1
    assert blob["prompts"]["0000000000000000"]["recovered"] == "differs"
    marked = [t for it in blob["items"] for c in it["models"].values() for t in c["trials"] if t["seen"] != "exact"]
    assert [t["h"] for t in marked] == ["0000000000000000"]


def test_every_audit_run_folder_has_its_page_and_the_report_links_into_it(runs):
    folder = next(runs.glob("position_biased/offline/*"))
    blob = blob_of(folder / "explorer.html")
    assert sum(len(c["trials"]) for it in blob["items"] for c in it["models"].values()) == 72
    report = (folder / "report.md").read_text()
    assert report.index("## Provenance") < report.index("## Cells")
    assert "explorer.html#item=" in report and "## Flipped examples" in report
    keys = {it["key"] for it in blob["items"]}
    linked = {line.split("#item=")[1].split("&")[0].replace("%2F", "/").replace("%3A", ":")
              for line in report.splitlines() if "#item=" in line}
    assert linked and linked <= keys
    table = report.split("## Per model and facet")[1].split("##")[0]
    assert "[" in table  # CIs in the per-model table


def test_word_diff_marks_what_changed():
    assert word_diff("a b c", "a x c") == [["=", "a"], ["-", "b"], ["+", "x"], ["=", "c"]]
    assert word_diff(None, "new") == [["+", "new"]]


def test_a_missing_input_is_one_line(tmp_path):
    done = run_module("facet_probe.explore", f"input={tmp_path / 'nope'}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: input {tmp_path / 'nope'} does not exist (give an audit or attack run folder, a folder of run "
        "folders, or a trials .jsonl file)"]


def test_every_re_ask_and_the_judges_verdict_are_on_the_page(runs, tmp_path):
    folder = next(runs.glob("position_biased/offline/*"))
    trials = load_trial_frame(folder)
    first = trials.iloc[[0]]
    again = first.assign(repeat_idx=1, raw_output="Answer: something else", trial_key="k-repeat-1")
    trials = pd.concat([trials, again], ignore_index=True)
    pd.DataFrame([{"judge": "gemini_pro", "trial_key": first["trial_key"].iloc[0], "verdict": "B",
                   "verdict_label": "different", "reason": "names another city", "set_verdict": "B",
                   "set_reason": "answers differ", "is_reference": False}]).to_csv(tmp_path / "judgments.csv", index=False)
    page = explorer_for_report(tmp_path, trials, read_items([folder / "items.jsonl"]), item_metrics(trials), "t")
    blob = blob_of(page)
    key = f"{first['facet'].iloc[0]}/{first['item_id'].iloc[0]}"
    (item,) = [it for it in blob["items"] if it["key"] == key]
    asked = [t for t in item["models"]["position_biased"]["trials"] if t["o"] == int(first["ordering_idx"].iloc[0])]
    assert [(t["r"], t["out"]) for t in asked] == [(0, first["raw_output"].iloc[0]), (1, "Answer: something else")]
    assert asked[0]["j"][0]["reason"] == "names another city" and asked[0]["j"][0]["verdict"] == "B"


def cells_of(blob: dict) -> dict[str, dict]:
    """item key -> the one model's cell (status, parse error, trials)."""
    return {it["key"]: next(iter(it["models"].values())) for it in blob["items"]}


def test_a_v0_0_1_trials_file_gets_its_page_from_the_report(tmp_path, caplog):
    api.report([f"input={V001}", f"out={tmp_path}", "bootstrap=10"])
    cells = cells_of(blob_of(tmp_path / "explorer.html"))
    assert {k: c["st"] for k, c in cells.items()} == {
        "option_order/mmlu_pro::1": "stable", "option_order/mmlu_pro::2": "flipped",
        "option_order/mmlu_pro::3": "flipped"}
    flipped = cells["option_order/mmlu_pro::2"]["trials"]
    # the reply, the stored answer (a source index) and what it means (the source-order option), correctness
    assert [(t["o"], t["out"], t["n"], t["mean"], t["c"]) for t in flipped] == [
        (0, "Answer: A", "0", "A", True), (1, "Answer: B", "0", "A", True), (2, "Answer: B", "2", "C", False)]
    unparsed = cells["option_order/mmlu_pro::3"]
    assert unparsed["pe"] and [t["mean"] for t in unparsed["trials"]] == ["B", None, "B"]
    assert {t["seen"] for c in cells.values() for t in c["trials"]} == {"unavailable"}  # no mode: not re-rendered
    assert "Traceback" not in caplog.text and "explorer.html not written" not in caplog.text


def test_the_explore_app_takes_a_v0_0_1_run_folder(tmp_path):
    page = explorer_for_runs([V001.parent], tmp_path, "t")
    blob = blob_of(page)
    assert len(blob["items"]) == 3 and blob["recovery"] == {"prompts": 9, "differs": 0, "unavailable": 9}


def test_an_explorer_failure_is_one_warning_line_and_the_report_stands(tmp_path, caplog, monkeypatch):
    for name in ("HYDRA_FULL_ERROR", "FACET_PROBE_USER_FULL_ERROR"):  # the user did not ask for tracebacks
        monkeypatch.delenv(name, raising=False)
    api.report([f"input={V001}", f"out={tmp_path}", "bootstrap=10"])  # an earlier report: its own folder
    (tmp_path / "explorer.html").unlink()
    (tmp_path / "explorer.html").mkdir()  # something in the page's way: the page cannot be written
    caplog.clear()
    result = api.report([f"input={V001}", f"out={tmp_path}", "bootstrap=10"])
    assert len(result["summary"]) == 1 and (tmp_path / "report.md").is_file()
    (warning,) = [r for r in caplog.records if "explorer.html not written" in r.getMessage()]
    assert warning.levelname == "WARNING" and not warning.exc_info
    assert f"python -m facet_probe.explore input=<this report's input> out={tmp_path};" in warning.getMessage()
    assert "\n" not in warning.getMessage() and "Traceback" not in caplog.text
