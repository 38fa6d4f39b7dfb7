"""A toy attack objective added from a test folder through configs alone (issue 25): a module on the Python
path and `conf/attack/letter_margin.yaml` on Hydra's search path; run end to end on the tiny LLaVA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(__file__).resolve().parent / "plugins"


def attack(tmp_path, model_path, *overrides):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "facet_probe.attack", "attack=letter_margin", f"hydra.searchpath=[file://{PLUGINS}/conf]",
           f"model.local_path={model_path}", f"out_root={tmp_path}", "limit=2", "attack.steps=4",
           "attack.update_every=2", "max_new_tokens=16", *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_toy_objective_from_a_test_folder_runs_end_to_end_and_never_resumes_on_a_changed_setting(
        tmp_path, answering_path):
    proc = attack(tmp_path, answering_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "attack" / "tiny_vlm" / "synthetic_visual_mcq" / "eps16-a1-s4-u2" / "letter_margin-cot"
    rows = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    attacked = [r for r in rows if r["attacked"]]
    assert len(rows) == 2 and attacked
    for r in attacked:  # its own loss components, its own success rule
        assert len(r["curve"]["gold_logp"]) == r["steps_run"]
        assert r["success"] == (r["adv_answer"] is not None and not r["adv_correct"])
    recorded = json.loads((run_dir / "attack_settings.json").read_text())["objective"]
    assert recorded == {"_target_": "toy_objective.LetterMargin", "answer_weight": 1.0, "margin_weight": 1.0}
    assert json.loads((run_dir / "run_status.json").read_text())["state"] == "done"

    changed = attack(tmp_path, answering_path, "attack.objective.margin_weight=2")  # a setting only it has
    assert changed.returncode == 2, changed.stderr[-3000:]
    assert "other settings (objective differ)" in changed.stderr and "Traceback" not in changed.stderr
    assert [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()] == rows
