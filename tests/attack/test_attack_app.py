"""`python -m facet_probe.attack` end to end on a tiny LLaVA that answers: outputs, resume, skips, the sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from facet_probe.attack.config import register
from facet_probe.attack.pixels import load_png
from facet_probe.attack.run import run_attack
from facet_probe.core.errors import ConfigError
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]
FAST = ["limit=5", "attack.steps=6", "attack.update_every=3", "max_new_tokens=16", "batch_size=4"]


def config(tmp_path, model_path, *overrides):
    register()
    GlobalHydra.instance().clear()
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        cfg = compose("attack_app", overrides=[f"model.local_path={model_path}", f"out_root={tmp_path}", *FAST,
                                               *overrides])
    GlobalHydra.instance().clear()
    return cfg


def rows(run_dir):
    return [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_an_attack_run_writes_every_output_and_resumes_per_sample(tmp_path, answering_path):
    cfg = config(tmp_path, answering_path, "attack=answer")
    run_dir = tmp_path / "attack" / cfg.run_name
    run_attack(cfg, run_dir)
    results = rows(run_dir)
    assert [r["sample_id"] for r in results] == [f"synthetic_visual_mcq__test-{i:05d}" for i in range(5)]
    attacked = [r for r in results if r["attacked"]]
    assert [r["selection_reason"] for r in results[:4]] == ["correct"] * 4 and len(attacked) >= 4
    for r in attacked:
        clean, adv = (load_png(run_dir / r["images"][k][0]) for k in ("clean", "adv"))
        assert clean.shape == adv.shape == (3, 32, 32)  # the model's resolution
        linf = float((adv - clean).abs().max())
        assert linf <= 16 / 255 + 1e-6 and linf == pytest.approx(r["linf"]) and linf > 0
        assert len(r["curve"]["loss"]) == r["steps_run"] and r["adv_output"] and r["clean_output"]
        assert r["success"] == (not r["adv_correct"]) and isinstance(r["rationale_changed"], bool)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n"] == 5 and summary["attacked"] == len(attacked) and summary["mode"] == "cot"
    for name in ("config.yaml", "attack_settings.json", "samples.csv", "loss_curves.csv", "loss_curves.png",
                 "run_status.json"):
        assert (run_dir / name).exists(), name
    assert json.loads((run_dir / "run_status.json").read_text())["state"] == "done"
    assert "w/ CoT: answer attack" in (run_dir.parent / "table.md").read_text()

    # resume: nothing left to do; then a sample lost to a kill is redone, the others are kept as they were
    before = (run_dir / "results.jsonl").read_text()
    run_attack(cfg, run_dir)
    assert (run_dir / "results.jsonl").read_text() == before
    assert json.loads((run_dir / "run_status.json").read_text())["already_done"] == 5
    lines = before.splitlines(keepends=True)
    (run_dir / "results.jsonl").write_text("".join(lines[:-1]) + lines[-1][:40])
    run_attack(cfg, run_dir)
    after = (run_dir / "results.jsonl").read_text().splitlines(keepends=True)
    assert after[:-1] == lines[:-1] and json.loads(after[-1])["sample_id"] == json.loads(lines[-1])["sample_id"]

    with pytest.raises(ConfigError, match="other settings"):
        cfg2 = config(tmp_path, answering_path, "attack=answer", "attack.objective.answer_weight=2")
        run_attack(cfg2, run_dir)


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_a_run_does_not_resume_on_another_stop_reasoning_sequence(tmp_path, answering_path):
    """The resume record holds every attack setting: results of the forced-template form are not reused."""
    cfg = config(tmp_path, answering_path, "attack=stop_reasoning", "attack.objective.sequence=template", "limit=1",
                 "attack.steps=2", "attack.update_every=2")
    run_dir = tmp_path / "attack" / cfg.run_name
    run_attack(cfg, run_dir)
    assert json.loads((run_dir / "attack_settings.json").read_text())["objective"]["sequence"] == "template"
    with pytest.raises(ConfigError, match="other settings [(]objective differ[)]"):
        run_attack(config(tmp_path, answering_path, "attack=stop_reasoning", "limit=1", "attack.steps=2",
                   "attack.update_every=2"), run_dir)


@pytest.mark.slow
def test_the_reference_loop_runs_in_a_budget_folder_of_its_own_and_reports_both_success_counts(
        tmp_path, answering_path, caplog):
    """`attack/loop=reference` (docs/attacks.md): its rules are recorded for resume, its runs sit in
    `...-loop_reference`, and the summary, table and closing line give the rule and the reference's count."""
    cfg = config(tmp_path, answering_path, "attack=stop_reasoning", "attack/loop=reference", "limit=2")
    run_dir = tmp_path / "attack" / cfg.run_name
    assert run_dir.parent.name == "eps16-a1-s6-u3-loop_reference"
    with caplog.at_level("INFO", logger="facet_probe.attack"):
        run_attack(cfg, run_dir)
    assert json.loads((run_dir / "attack_settings.json").read_text())["loop"]["name"] == "reference"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["loop"] == "reference" and summary["success_rule"].startswith("a wrong answer")
    assert summary["successes"] == summary["reference_successes"]  # the reference's rule is the rule
    assert all(r["updates"] <= 5 for r in rows(run_dir) if r["attacked"])  # 6 iterations, 5 updates at most
    assert f"attacks succeeded: {summary['successes']}/{summary['attacked']} by a wrong answer" in caplog.text
    assert "counts the reference's" in (run_dir.parent / "table.md").read_text()
    with pytest.raises(ConfigError, match="other settings [(]loop differ[)]"):
        run_attack(config(tmp_path, answering_path, "attack=stop_reasoning", "limit=2"), run_dir)


def test_a_run_does_not_resume_on_other_weights_at_the_same_path(tmp_path, answering_path):
    """Retrained weights (`make tiny-vlm`) at the model's path: the old results are not taken as done."""
    import shutil

    from facet_probe_dev.testing.tiny_models import retrain_in_place

    folder = shutil.copytree(answering_path, tmp_path / "model")
    cfg = config(tmp_path, folder, "attack=answer", "limit=1")
    run_dir = tmp_path / "attack" / cfg.run_name
    run_attack(cfg, run_dir)
    assert len(rows(run_dir)) == 1
    retrain_in_place(folder)
    with pytest.raises(ConfigError, match="other settings [(]weights differ[)]"):
        run_attack(cfg, run_dir)


def test_cot_only_attacks_are_skipped_without_cot_and_api_models_are_refused(tmp_path, answering_path):
    cfg = config(tmp_path, answering_path, "attack=rationale", "prompt.cot=false")
    run_dir = tmp_path / "attack" / cfg.run_name
    run_attack(cfg, run_dir)
    assert json.loads((run_dir / "run_status.json").read_text())["state"] == "skipped"
    assert not (run_dir / "results.jsonl").exists()
    register()
    GlobalHydra.instance().clear()
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        cfg = compose("attack_app", overrides=["model=oracle", f"out_root={tmp_path}", "limit=1"])
    GlobalHydra.instance().clear()
    with pytest.raises(ConfigError, match="not a local HuggingFace model"):
        run_attack(cfg, tmp_path / "oracle")


@pytest.mark.slow
def test_the_command_line_sweep_fills_the_paper_table(tmp_path, answering_path):
    proc = run_module("facet_probe.attack", "-m", "attack=none,answer,stop_reasoning", "prompt.cot=true,false",
                   f"model.local_path={answering_path}", f"out_root={tmp_path}", "limit=2", "attack.steps=2",
                   "attack.update_every=2", "max_new_tokens=16", cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    group = tmp_path / "attack" / "tiny_vlm" / "synthetic_visual_mcq" / "eps16-a1-s2-u2"
    assert sorted(p.name for p in group.iterdir() if p.is_dir()) == [
        "answer-cot", "answer-direct", "none-cot", "none-direct", "stop_reasoning-cot", "stop_reasoning-direct"]
    assert json.loads((group / "stop_reasoning-direct" / "run_status.json").read_text())["state"] == "skipped"
    table = (group / "table.md").read_text()
    line = next(ln for ln in table.splitlines() if ln.startswith("| tiny_vlm / synthetic_visual_mcq | ") and
                "(n=2)" in ln)
    assert line.count("(n=2)") == 5  # a column per run present (no rationale run swept: no rationale column)
    table1 = (group / "table1.md").read_text()  # the paper's Table 1 on one population, beside it
    assert "Population: the items whose clean reply with CoT is correct" in table1
    assert "| ours: tiny_vlm / synthetic_visual_mcq |" in table1 and (group / "figure7.md").exists()
    assert "error" not in proc.stderr.lower()


def test_user_errors_are_one_line_and_exit_2(tmp_path):
    proc = run_module("facet_probe.attack", f"model.local_path={tmp_path}/missing", f"out_root={tmp_path}", "limit=1",
                   cwd=ROOT)
    assert proc.returncode == 2 and "error: tiny_vlm: local_path" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("override", "message"), [
    ("attack.steps=abc", "attack.steps must be a whole number; got 'abc'"),
    ("attack.update_every=1.5", "attack.update_every must be a whole number; got 1.5"),
    ("attack.eps=abc", "attack.eps must be a number or a fraction like 16/255"),
])
def test_a_budget_the_run_name_cannot_read_is_one_line_and_exit_2(tmp_path, override, message):
    """The run name is resolved before the settings are typed; a bad budget used to end in OmegaConf's traceback."""
    proc = run_module("facet_probe.attack", override, f"out_root={tmp_path}", cwd=ROOT)
    assert proc.returncode == 2 and f"error: {message}" in proc.stderr and "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing started


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_out_of_memory_halves_the_batch_and_redoes_the_chunk(tmp_path, answering_path, monkeypatch):
    import torch

    import facet_probe.attack.run as app

    real, sizes = app.run_pgd, []

    def flaky(runner, samples, *a, **kw):
        sizes.append(len(samples))
        if len(samples) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(runner, samples, *a, **kw)

    monkeypatch.setattr(app, "run_pgd", flaky)
    cfg = config(tmp_path, answering_path, "attack=answer", "limit=4", "attack.steps=2")
    run_dir = tmp_path / "oom"
    run_attack(cfg, run_dir)
    assert sizes == [4, 2, 2] and len(rows(run_dir)) == 4
    assert json.loads((run_dir / "run_status.json").read_text())["batch_size"] == 2


@pytest.mark.parametrize(("target", "bad", "good", "match"), [
    ("internvl.InternVLRunner", {"max_tiles": 6}, {"max_tiles": 1}, "one InternVL tile per image; set model.max_tiles=1"),
    ("qwen.QwenRunner", {"thinking": True}, {"thinking": False}, "thinking off .*set model.thinking=false"),
])
def test_a_family_states_what_an_attack_needs_of_its_config(target, bad, good, match):
    """The family's own `attack_config_errors` hook, not an issubclass test in the attack app."""
    from omegaconf import OmegaConf

    from facet_probe.attack.run import model_node

    node = {"_target_": f"facet_probe.runners.hf.{target}", "name": "m"}
    with pytest.raises(ConfigError, match=f"model m: attacks cannot run with this config: an attack needs .*{match}"):
        model_node(OmegaConf.create({"model": {**node, **bad}}))
    assert model_node(OmegaConf.create({"model": {**node, **good}})) == {**node, **good}


def test_the_attack_runs_from_python_without_the_hydra_runtime(tmp_path, answering_path):
    """`run_attack(cfg)` with no output folder writes where the app would, with no HydraConfig set."""
    from hydra.core.hydra_config import HydraConfig

    from facet_probe.attack import run as run_module

    cfg = config(tmp_path, answering_path, "attack=none", "limit=1")
    assert not HydraConfig.initialized()
    run_dir = run_module.run_attack(cfg)
    assert run_dir == tmp_path / "attack" / cfg.run_name and len(rows(run_dir)) == 1
    assert "HydraConfig" not in Path(run_module.__file__).read_text()  # nothing reads the Hydra runtime


@pytest.mark.slow
def test_the_attack_loads_its_dataset_without_the_audit_app():
    """The dataset lookup is shared (`datasets.configs`): loading the attack's items imports no audit module."""
    code = ("import sys\nfrom hydra import compose, initialize_config_module\n"
            "from facet_probe.attack.config import register\nfrom facet_probe.attack.run import load_items\n"
            "register()\nwith initialize_config_module('facet_probe.conf', version_base='1.3'):\n"
            "    cfg = compose('attack_app', overrides=['limit=2'])\n"
            "assert len(load_items(cfg)) == 2\nprint(sorted(m for m in sys.modules if m.startswith('facet_probe.audit.plan')))\n")
    # a real process: which modules an import pulls in can only be seen in a fresh interpreter
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
