"""A toy attack objective added from a test folder through configs alone (issue 25): a module on the Python
path and `conf/attack/letter_margin.yaml` on Hydra's search path; run end to end on the tiny LLaVA, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from facet_probe import api
from facet_probe.core.errors import ConfigError

PLUGINS = Path(__file__).resolve().parent / "plugins"


def attack(tmp_path, model_path, *overrides) -> Path:
    return api.attack(["attack=letter_margin", f"hydra.searchpath=[file://{PLUGINS}/conf]",
                       f"model.local_path={model_path}", f"out_root={tmp_path}", "limit=2", "attack.steps=4",
                       "attack.update_every=2", "max_new_tokens=16", *overrides]).run_dir


def results(run_dir: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_toy_objective_from_a_test_folder_runs_end_to_end_and_never_resumes_on_a_changed_setting(
        tmp_path, answering_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))  # as PYTHONPATH=<dir> on the command line
    run_dir = attack(tmp_path, answering_path)
    assert run_dir == tmp_path / "attack" / "tiny_vlm" / "synthetic_visual_mcq" / "eps16-a1-s4-u2" / "letter_margin-cot"
    rows = results(run_dir)
    attacked = [r for r in rows if r["attacked"]]
    assert len(rows) == 2 and attacked
    for r in attacked:  # its own loss components, its own success rule
        assert len(r["curve"]["gold_logp"]) == r["steps_run"]
        assert r["success"] == (r["adv_answer"] is not None and not r["adv_correct"])
    recorded = json.loads((run_dir / "attack_settings.json").read_text())["objective"]
    assert recorded == {"_target_": "toy_objective.LetterMargin", "answer_weight": 1.0, "margin_weight": 1.0}
    assert json.loads((run_dir / "run_status.json").read_text())["state"] == "done"

    # a setting only it has names a folder of its own (issue 39, point 8); the first run's results stay as they were
    other = attack(tmp_path, answering_path, "attack.objective.margin_weight=2")
    assert other == run_dir.parent / "letter_margin-cot_attack.objective.margin_weight=2.0"
    assert json.loads((other / "attack_settings.json").read_text())["objective"]["margin_weight"] == 2.0
    assert results(run_dir) == rows
    # and a folder given by hand still never resumes on other settings
    with pytest.raises(ConfigError, match=r"other settings \(objective differ\)"):
        attack(tmp_path, answering_path, "attack.objective.margin_weight=2", f"hydra.run.dir={run_dir}")
    assert results(run_dir) == rows
