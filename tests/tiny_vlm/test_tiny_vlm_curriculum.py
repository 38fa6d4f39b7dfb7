"""The curriculum: stages declared in YAML, typed, and checked before any training starts."""

from __future__ import annotations

import pytest

from facet_probe_dev.tiny_vlm import echo
from facet_probe_dev.tiny_vlm.curriculum import DEFAULT_CURRICULUM, Stage, check, load, parse
from facet_probe_dev.tiny_vlm.data import Background, available_sets

KNOWN = [*available_sets(), echo.NAME]


def test_the_default_curriculum_loads_and_trains_every_set_in_its_last_stage():
    stages = load(DEFAULT_CURRICULUM, KNOWN)
    assert stages[0].is_copy and stages[0].trained_patterns() == ["induction", "lookup"]  # the warm-up
    assert set(stages[-1].sets) == set(KNOWN) and all(w > 0 for w in stages[-1].sets.values())
    assert len({st.name for st in stages}) == len(stages)


def test_the_answer_first_experiment_is_the_last_stages_mix_with_answer_first_option_sets():
    """curricula/answer_first.yaml (issue 24): the default's last mix, answer-first CoT replies on the option
    sets only, and no answer-first reply anywhere in `make tiny-vlm`'s curriculum."""
    (stage,) = load(DEFAULT_CURRICULUM.with_name("answer_first.yaml"), KNOWN)
    assert stage.sets == load(DEFAULT_CURRICULUM, KNOWN)[-1].sets and stage.fresh_optimizer and stage.data_seed
    assert set(stage.answer_first) == {"synthetic_visual_mcq", "synthetic_mcq", "synthetic_image_set", echo.NAME}
    assert not any(st.answer_first for st in load(DEFAULT_CURRICULUM, KNOWN))


def test_the_background_experiment_greys_the_picture_option_sets_only_and_white_reasons_first():
    """curricula/answer_first_background.yaml (issue 45): the two picture option sets get a grey background
    whose level decides the CoT reply's form; white (the audit's and the attack's pictures) reasons first, and
    the boundary lies inside the attack's eps (16/255) of it. Nothing of it in `make tiny-vlm`'s curriculum."""
    (stage,) = load(DEFAULT_CURRICULUM.with_name("answer_first_background.yaml"), KNOWN)
    assert set(stage.sets) == set(load(DEFAULT_CURRICULUM, KNOWN)[-1].sets) and stage.fresh_optimizer
    assert set(stage.answer_first_background) == {"synthetic_visual_mcq", "synthetic_image_set"}
    assert not stage.answer_first and stage.data_seed
    for bg in stage.answer_first_background.values():
        assert isinstance(bg, Background) and not bg.answers_first(255) and bg.answers_first(255 - 16)
        assert bg.low < bg.threshold <= bg.high == 255 and 0 < bg.white_share < 1
    assert not any(st.answer_first_background for st in load(DEFAULT_CURRICULUM, KNOWN))


def test_a_stage_trains_sets_or_copy_patterns_and_induction_takes_the_share_left():
    assert not Stage("t", 1, 1e-3, sets={"synthetic_mcq": 1}).is_copy
    assert Stage("c", 1, 1e-3, patterns={"caption": 0.3}).trained_patterns() == ["induction", "caption"]
    assert Stage("c", 1, 1e-3, patterns={"caption": 1.0}).trained_patterns() == ["caption"]
    both = Stage("c", 1, 1e-3, patterns={"caption": 0.5, "lookup": 0.5})
    assert both.trained_patterns() == ["caption", "lookup"]


@pytest.mark.parametrize(("stage", "message"), [
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1}, patterns={"caption": 1}), "both `sets` and `patterns`"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mqc": 1}), "unknown sets ['synthetic_mqc']"),
    (Stage("x", 1, 1e-3, patterns={"captions": 1}), "unknown patterns ['captions']"),
    (Stage("x", 1, 1e-3, patterns={"caption": 0.7, "lookup": 0.7}), "more than 1"),
    (Stage("x", -1, 1e-3), "steps >= 0 and lr > 0"),
    (Stage("x", 1, 0.0), "steps >= 0 and lr > 0"),
    (Stage("x", 1, 1e-3, shrink=0.0), "0 < shrink <= 1"),
    (Stage("x", 1, 1e-3, until=1.5), "0 <= until <= 1"),
    (Stage("x", 1, 1e-3, retries=2), "`until` for any"),
    (Stage("x", 1, 1e-3, shrink=0.5, perturb=-0.1), "perturb >= 0"),
    (Stage("x", 1, 1e-3, patterns={"lookup": 0.5}, data_seed=3), "only task stages"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1}, give_up_at=400, give_up_below=1.5), "0 <= give_up_below <= 1"),
    (Stage("x", 1, 1e-3, patterns={"lookup": 0.5}, give_up_at=400, give_up_below=0.5), "only task stages"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1}, answer_first={"synthetic_docs": 0.1}),
     "`answer_first` for sets it does not train ['synthetic_docs']"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1}, answer_first={"synthetic_mcq": 1.5}), "shares in [0, 1]"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1}, answer_first_background={"synthetic_docs": Background()}),
     "`answer_first_background` for sets it does not train ['synthetic_docs']"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1}, answer_first={"synthetic_mcq": 0.1},
           answer_first_background={"synthetic_mcq": Background()}), "both `answer_first` and"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1},
           answer_first_background={"synthetic_mcq": Background(low=250, high=240)}), "0 <= low <= high <= 255"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1},
           answer_first_background={"synthetic_mcq": Background(white_share=2)}), "white_share in [0, 1]"),
    (Stage("x", 1, 1e-3, sets={"synthetic_mcq": 1},
           answer_first_background={"synthetic_mcq": Background(channels="bx")}), "channels of 'rgb'"),
])
def test_a_stage_that_cannot_run_is_named_with_the_reason(stage, message):
    with pytest.raises(ValueError, match="stage 'x'") as err:
        check([Stage("fine", 1, 1e-3), stage], KNOWN, "here")
    assert message in str(err.value) and str(err.value).startswith("here:")


def test_an_unknown_key_in_the_yaml_is_an_error_naming_the_stage():
    with pytest.raises(ValueError, match=r"stage 1 \(letters\).*stpes"):
        parse([{"name": "warm", "steps": 1, "lr": 1e-3}, {"name": "letters", "stpes": 3, "lr": 1e-3}], KNOWN)


def test_a_file_holds_a_list_of_stages_or_a_stages_list_beside_yaml_anchors(tmp_path):
    (tmp_path / "plain.yaml").write_text("- {name: a, steps: 5, lr: 1.0e-3}\n")
    (tmp_path / "anchored.yaml").write_text(
        "mix: &mix {synthetic_mcq: 2, tiny_vlm_echo: 1}\n"
        "stages:\n  - {name: a, steps: 5, lr: 1.0e-3, sets: *mix, until: 0.9}\n")
    assert load(tmp_path / "plain.yaml", KNOWN) == [Stage("a", 5, 1e-3)]
    assert load(tmp_path / "anchored.yaml", KNOWN) == [
        Stage("a", 5, 1e-3, sets={"synthetic_mcq": 2.0, echo.NAME: 1.0}, until=0.9)]
    with pytest.raises(FileNotFoundError, match="no curriculum file"):
        load(tmp_path / "missing.yaml", KNOWN)
    (tmp_path / "empty.yaml").write_text("stages: []\n")
    with pytest.raises(ValueError, match="non-empty list of stages"):
        load(tmp_path / "empty.yaml", KNOWN)
