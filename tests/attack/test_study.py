"""The ImageNet study (attack paper, Appendix C): its experiment config and its table."""

from __future__ import annotations

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from test_report import grid, write_grid

from facet_probe.attack.config import register
from facet_probe.attack.study import main


def test_the_study_config_sweeps_the_three_tasks_on_every_validation_image():
    register()
    GlobalHydra.instance().clear()
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        cfg = compose("attack_app", overrides=["+experiment=attack_imagenet_study", "dataset=imagenet8"],
                      return_hydra_config=True)
    GlobalHydra.instance().clear()
    assert dict(cfg.hydra.sweeper.params) == {"dataset": "imagenet4,imagenet8,imagenet16",
                                              "attack": "answer,rationale,stop_reasoning", "prompt.cot": "true,false"}
    assert cfg.dataset.name == "imagenet8" and cfg.dataset.per_class == 50 and cfg.dataset.classes == 8


def test_the_study_table_has_a_row_per_task_on_its_population(tmp_path):
    model = tmp_path / "attack" / "m"
    for task in ("imagenet4", "imagenet16"):
        write_grid(model / task / "eps16-a1-s200-u10", grid(), dataset=task)
    assert main([str(model)]) == 0
    lines = (model / "imagenet_study.md").read_text().splitlines()
    rows = [ln for ln in lines if ln.startswith("| imagenet")]
    assert [r.split(" | ")[0] for r in rows] == ["| imagenet4", "| imagenet16"]
    assert rows[0].split(" | ")[1:5] == ["eps16-a1-s200-u10", "2", "50.0", "0.0"]
    assert main([str(tmp_path / "nothing")]) == 2
