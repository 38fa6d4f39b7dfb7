"""Experiments carry settings: any key, a grid of them, Hydra's `+experiment=` spelling, and user config
folders on `hydra.searchpath` inside an experiment (issue 22, point 5)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from facet_probe.app.boundary import default_group_appends
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]


def app(*args: str) -> Ran:
    """`python -m facet_probe <args> progress=false`, in this process."""
    return run_module("facet_probe", *args, "progress=false", cwd=ROOT)


def user_conf(tmp_path: Path) -> Path:
    """A user's own config folder: a model, a dataset and two experiments that exist nowhere in the package."""
    conf = tmp_path / "conf"
    files = {
        "model/my_random.yaml": """
            _target_: facet_probe.runners.policies.SeededRandomPolicy
            name: my_random
            seed: 3
        """,
        "dataset/my_mcq.yaml": """
            _target_: facet_probe.datasets.synthetic.mcq.SyntheticMCQ
            name: my_mcq
            path: null
            n: 3
            seed: 7
            split: test
            holdout_n: 5000
        """,
        "experiment/my_panel.yaml": """
            # @package _global_
            experiment:
              name: my_panel
              models: [oracle, my_random]
              cells:
                - facet: option_order
                  datasets: [my_mcq]
            k: 3
            repeats: 2
        """,
        "experiment/my_grid.yaml": """
            # @package _global_
            defaults:
              - override /model: seeded_random
            experiment:
              name: my_grid
              cells:
                - facet: option_order
                  datasets: [my_mcq]
            prompt:
              cot: true
            hydra:
              sweeper:
                params:
                  model.seed: 1,2
        """,
    }
    for name, text in files.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(textwrap.dedent(text))
    return conf


def resolved(run: Path) -> dict:
    return yaml.safe_load((run / "config.yaml").read_text())


def test_hydras_append_spelling_of_an_experiment_is_accepted():
    assert default_group_appends(["+experiment=diagnostics", "+x.y=1", "experiment=a"], ("experiment",)) == [
        "experiment=diagnostics", "+x.y=1", "experiment=a"]


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_plus_experiment_runs_the_named_experiment(tmp_path):
    proc = app("+experiment=diagnostics", "model=oracle", "limit=1", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr
    facets = {json.loads(line)["facet"] for line in (tmp_path / "trials.jsonl").read_text().splitlines()}
    assert facets == {"dialog_turn_order", "few_shot_order", "tool_description_order"}


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_an_experiment_from_a_user_folder_sets_any_key_and_names_user_configs(tmp_path):
    conf = user_conf(tmp_path)
    run = tmp_path / "run"
    proc = app(f"hydra.searchpath=[file://{conf}]", "experiment=my_panel", f"hydra.run.dir={run}")
    assert proc.returncode == 0, proc.stderr
    cfg = resolved(run)
    assert (cfg["k"], cfg["repeats"]) == (3, 2)
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    assert {t["model"] for t in trials} == {"oracle", "my_random"}
    assert {t["dataset"] for t in trials} == {"my_mcq"}
    assert len(trials) == 2 * 3 * 3 * 2  # models x items x K x repeats


@pytest.mark.slow
def test_an_experiment_grid_gives_one_run_folder_per_point_with_its_settings(tmp_path):
    conf = user_conf(tmp_path)
    proc = app("-m", f"hydra.searchpath=[file://{conf}]", "experiment=my_grid", f"hydra.sweep.dir={tmp_path / 'sw'}")
    assert proc.returncode == 0, proc.stderr
    runs = sorted(p.parent for p in (tmp_path / "sw").rglob("trials.jsonl"))
    assert [r.name for r in runs] == ["cot-k6-seed42_model.seed=1", "cot-k6-seed42_model.seed=2"]
    assert [resolved(r)["model"]["seed"] for r in runs] == [1, 2]
    assert all(resolved(r)["prompt"]["cot"] is True for r in runs)
    replies = [[json.loads(x)["raw_output"] for x in (r / "trials.jsonl").read_text().splitlines()] for r in runs]
    assert replies[0] != replies[1]  # the grid point's setting reached the model


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_model_settings_reach_every_model_of_a_panel(tmp_path):
    conf = user_conf(tmp_path)
    run = tmp_path / "run"
    proc = app(f"hydra.searchpath=[file://{conf}]", "experiment=my_panel", "experiment.models=[seeded_random,my_random]",
               "+experiment.model_settings.seed=11", f"hydra.run.dir={run}")
    assert proc.returncode == 0, proc.stderr
    status = json.loads((run / "run_status.json").read_text())
    seeds = {name: m["fingerprint"].get("seed") for name, m in status["models"].items()}
    assert seeds == {"seeded_random": 11, "my_random": 11}


def test_a_model_override_the_panel_would_ignore_is_refused(tmp_path):
    proc = app("experiment=diagnostics", "experiment.models=[oracle]", "model=seeded_random", "model.seed=5",
               "limit=1", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "experiment.model_settings" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "trials.jsonl").exists()


def test_a_model_setting_a_panel_model_lacks_is_refused_before_any_call(tmp_path):
    proc = app("experiment=diagnostics", "experiment.models=[oracle]", "model=oracle",
               "+experiment.model_settings.generation.temperature=0.7", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "experiment.model_settings sets generation" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_dataset_settings_reach_every_dataset_of_a_panel(tmp_path):
    proc = app("experiment=diagnostics", "model=oracle", "+experiment.dataset_settings.n=2", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr
    trials = [json.loads(line) for line in (tmp_path / "trials.jsonl").read_text().splitlines()]
    per_dataset = {d: len({t["item_id"] for t in trials if t["dataset"] == d}) for d in {t["dataset"] for t in trials}}
    assert per_dataset == {"synthetic_dialog": 2, "synthetic_few_shot": 2, "synthetic_tools": 2}
