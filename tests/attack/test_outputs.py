"""Run-folder pieces: resumable results file, settings check, sample names, summaries, the paper tables."""

from __future__ import annotations

import json

import pytest
from helpers import BUILT_IN

from facet_probe.attack.grid import Column, Grid, column_meta
from facet_probe.attack.outputs import ResultsFile, check_settings, image_names, sample_ids
from facet_probe.attack.tables import _cell, rebuild, summarize, write_group_table, write_run_tables
from facet_probe.core.errors import ConfigError


def test_results_file_drops_a_torn_last_line_and_refuses_a_damaged_one(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"sample_id": "a"}\n{"sample_id": "b"}\n{"sample_id": "c", "cl')
    f = ResultsFile(path)
    assert set(f.rows) == {"a", "b"} and f.done("a") and not f.done("c")
    assert path.read_text() == '{"sample_id": "a"}\n{"sample_id": "b"}\n'
    f.append({"sample_id": "c"})
    assert ResultsFile(path).done("c")
    path.write_text('{"sample_id": "a"}\nnot json\n{"sample_id": "b"}\n')
    with pytest.raises(ConfigError, match=":2: malformed"):
        ResultsFile(path)


def test_a_resumed_run_must_use_the_same_settings(tmp_path):
    check_settings(tmp_path, {"eps": 16 / 255, "steps": 200})
    check_settings(tmp_path, {"eps": 16 / 255, "steps": 200})
    with pytest.raises(ConfigError, match="steps differ"):
        check_settings(tmp_path, {"eps": 16 / 255, "steps": 100})


def test_sample_names_are_file_safe_and_unique():
    ids = sample_ids(["scienceqa::test-12", "a::b/c", "a::b:c"])
    assert ids["scienceqa::test-12"] == "scienceqa__test-12" and ids["a::b/c"] == "a__b_c"
    assert ids["a::b:c"].startswith("a__b_c-") and len(set(ids.values())) == 3
    assert image_names("s", 1) == [("s_clean.png", "s_adv.png")]
    assert image_names("s", 2)[1] == ("s_img1_clean.png", "s_img1_adv.png")


def row(i, *, correct=True, selected=True, attacked=True, success=False, changed=False, first=False, mode="cot"):
    r = {"sample_id": f"s{i}", "clean_correct": correct, "selected": selected,
         "selection_reason": "correct" if selected else "wrong_answer", "attacked": attacked, "success": success,
         "clean_answer_first": False, "mode": mode}
    if attacked:
        r.update(adv_correct=not success, rationale_changed=changed, adv_answer_first=first, linf_255=16.0,
                 steps_run=10, stopped_early=success, curve={"loss": [1.0, 0.5], "answer_ce": [1.0, 2.0]})
    return r


def meta(attack, mode="cot"):
    """A run's summary meta as the app writes it (with its column's title and order, `grid.column_meta`)."""
    objective = BUILT_IN[attack]() if attack in BUILT_IN else None
    return {"model": "m", "dataset": "d", "attack": attack, "mode": mode, "eps_255": "16", "alpha_255": "1",
            "steps": 10, "update_every": 5, **column_meta(objective)}


def test_summary_counts_follow_the_paper_definitions():
    rows = [row(0, success=True, changed=True, first=True), row(1, success=True), row(2),
            row(3, correct=False, selected=False, attacked=False)]
    s = summarize(rows, meta("stop_reasoning"))
    assert (s["n"], s["clean_accuracy"], s["attacked"], s["successes"]) == (4, 0.75, 3, 2)
    assert s["adv_accuracy"] == 0.25  # only s2 is still right; s3 counts with its (wrong) clean answer
    assert s["success_rate"] == pytest.approx(2 / 3) and s["rationale_changed_share"] == 0.5
    assert s["skip_rationale_share"] == pytest.approx(1 / 3) and s["not_selected"] == {"wrong_answer": 1}
    direct = summarize([row(0, success=True, mode="direct")], meta("answer", "direct"))
    assert direct["rationale_changed_share"] is None and direct["skip_rationale_share"] is None


def test_a_no_attack_column_taken_from_a_clean_pass_carries_none_of_the_attacks_counts(tmp_path):
    """It once copied the attack run's successes and adversarial shares beside its 0 attacked samples."""
    s = summarize([row(0, success=True, changed=True, first=True), row(1)], meta("stop_reasoning"))
    cell = _cell(Grid(tmp_path, summaries={("cot", "stop_reasoning"): s}), Column("cot", "none", "no attack", -1))
    assert (cell["attacked"], cell["successes"], cell["reference_successes"]) == (0, 0, 0)
    assert cell["rationale_changed_share"] is None and cell["skip_rationale_share"] is None
    assert cell["clean_skip_rationale_share"] == s["clean_skip_rationale_share"]


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_the_budget_folder_table_has_the_paper_layout(tmp_path):
    runs = {("answer", "direct"): [row(0, success=True), row(1)], ("answer", "cot"): [row(0), row(1)],
            ("stop_reasoning", "cot"): [row(0, success=True, first=True, changed=True), row(1)]}
    for (attack, mode), rows in runs.items():
        folder = tmp_path / f"{attack}-{mode}"
        folder.mkdir()
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        write_run_tables(folder, rows, meta(attack, mode))
        assert (folder / "loss_curves.csv").read_text().startswith("sample_id,step,loss,answer_ce")
        assert (folder / "loss_curves.png").stat().st_size > 0
    table = write_group_table(tmp_path).read_text()
    # the columns of the runs present (no rationale run: no rationale column), in the objectives' declared order
    assert "| | w/o CoT: no attack | w/o CoT: answer attack | w/ CoT: no attack | w/ CoT: answer attack | " \
           "w/ CoT: stop-reasoning attack |" in table
    assert "| m / d | 100.0 (n=2) | 50.0 (n=2) | 100.0 (n=2) | 100.0 (n=2) | 50.0 (n=2) |" in table
    assert "| m / d | - (of 0) | 100.0 (of 1) |" in table  # rationale changed, of the successes
    assert "| w/ CoT: stop-reasoning attack | 0.0 (of 2) | 50.0 (of 2) |" in table  # skipped rationale
    assert "no attack taken from the clean pass of the answer run" in table
    (tmp_path / "table.md").unlink()
    assert tmp_path / "table.md" in rebuild(tmp_path) and (tmp_path / "table.md").read_text() == table


def test_a_summary_written_before_columns_were_recorded_takes_its_title_from_its_objective_class(tmp_path):
    """Older run folders: the class named in attack_settings.json gives the title and order; a class this machine
    cannot import (a plug-in elsewhere) leaves the attack's own name."""
    for attack, target in (("stop_reasoning", "facet_probe.attack.objectives.stop_reasoning.StopReasoningObjective"),
                           ("answer", "facet_probe.attack.objectives.answer.AnswerObjective"),
                           ("margin", "not_here.Margin")):
        folder = tmp_path / f"{attack}-cot"
        folder.mkdir()
        rows = [row(0, success=True), row(1)]
        write_run_tables(folder, rows, {k: v for k, v in meta(attack).items() if not k.startswith("attack_")})
        (folder / "attack_settings.json").write_text(json.dumps({"objective": {"_target_": target}}))
    head = next(ln for ln in write_group_table(tmp_path).read_text().splitlines() if ln.startswith("| | "))
    assert head == "| | w/ CoT: no attack | w/ CoT: answer attack | w/ CoT: stop-reasoning attack | w/ CoT: margin |"


def test_a_record_the_previous_version_wrote_still_resumes_with_the_same_settings(tmp_path):
    """Before objectives were plug-ins the weights were top-level keys, and model configs had no adapter key:
    the same settings resume; a changed weight still does not. A stop-reasoning record from before the template
    ended with the family's end of turn (`end_of_reply`) is refused: its template ended with the first EOS."""
    from facet_probe.attack.config import AttackSettings, register

    register()

    def record(attack, target):
        settings = AttackSettings.from_config({"name": attack, "objective": {"_target_": target}}).as_dict()
        return {"attack": attack, "eps": 16 / 255, "objective": settings["objective"],
                "model_config": {"name": "m", "dtype": "float32", "adapter": None, "adapter_revision": None}}

    now = record("rationale", "facet_probe.attack.objectives.rationale.RationaleObjective")
    old = {"attack": "rationale", "eps": 16 / 255, "answer_weight": 1.0, "kl_weight": 1.0,
           "template_weight": 1.0, "sequence": "own_reply", "model_config": {"name": "m", "dtype": "float32"}}
    (tmp_path / "attack_settings.json").write_text(json.dumps(old))
    check_settings(tmp_path, now)
    changed = {**now, "objective": {**now["objective"], "kl_weight": 2.0}}
    with pytest.raises(ConfigError, match="objective differ"):
        check_settings(tmp_path, changed)
    with pytest.raises(ConfigError, match="model_config differ"):
        check_settings(tmp_path, {**now, "model_config": {**now["model_config"], "adapter": "/lora"}})
    (stop := tmp_path / "stop").mkdir()
    (stop / "attack_settings.json").write_text(json.dumps({**old, "attack": "stop_reasoning"}))
    with pytest.raises(ConfigError, match="objective differ"):
        check_settings(stop, record("stop_reasoning",
                                    "facet_probe.attack.objectives.stop_reasoning.StopReasoningObjective"))


@pytest.mark.parametrize("dataset", ["scienceqa", "imagenet4"])
def test_a_record_from_before_the_dataset_layout_switch_resumes_and_the_reference_layout_does_not(tmp_path, dataset):
    """`dataset.layout` (issue 42) defaults to null, the layout from before it existed: an attack folder whose
    record lacks it resumes under the default and is refused under `layout=reference`."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    node = OmegaConf.to_container(OmegaConf.load(files("facet_probe.conf") / "dataset" / f"{dataset}.yaml"))
    node.pop("defaults", None)
    old = {"attack": "answer", "dataset_config": {k: v for k, v in node.items() if k != "layout"}}
    (tmp_path / "attack_settings.json").write_text(json.dumps(old))
    check_settings(tmp_path, {"attack": "answer", "dataset_config": node})
    with pytest.raises(ConfigError, match="dataset_config differ"):
        check_settings(tmp_path, {"attack": "answer", "dataset_config": {**node, "layout": "reference"}})
