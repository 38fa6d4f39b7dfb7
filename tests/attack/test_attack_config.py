"""Attack settings: budgets as fractions or floats, validation, run names, the composed app config."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from facet_probe.attack.config import AttackSettings, attack_run_name, budget_label, parse_budget, register
from facet_probe.core.errors import ConfigError


@pytest.mark.parametrize(("value", "expected"), [("16/255", 16 / 255), ("8 / 255", 8 / 255), (0.0627, 0.0627),
                                                 ("0.05", 0.05), (1, 1.0), ("0.5/2", 0.25)])
def test_budgets_accept_fractions_and_floats(value, expected):
    assert parse_budget(value) == pytest.approx(expected)


@pytest.mark.parametrize("value", ["16//255", "x", "1/0", True, None, -0.1, float("nan")])
def test_bad_budgets_are_config_errors(value):
    with pytest.raises(ConfigError):
        parse_budget(value, "attack.eps")


ANSWER = {"_target_": "facet_probe.attack.objectives.answer.AnswerObjective"}
STOP = {"_target_": "facet_probe.attack.objectives.stop_reasoning.StopReasoningObjective"}


def test_settings_validate_keys_and_ranges():
    s = AttackSettings.from_config({"name": "rationale", "eps": "8/255", "alpha": 0.5 / 255, "steps": 3,
                                    "objective": ANSWER})
    assert s.eps == pytest.approx(8 / 255) and s.alpha == pytest.approx(0.5 / 255) and s.steps == 3
    for bad, match in [({"epsilon": 1}, "unknown attack setting"), ({"alpha": "2/255", "eps": "1/255"}, "larger than"),
                       ({"update_every": 0}, "update_every"), ({"targeted": "B"}, "targeted"),
                       ({"eps": 2}, "pixel units"), ({"steps": 1.5}, "attack.steps must be a whole number"),
                       ({"update_every": "x"}, "attack.update_every must be a whole number")]:
        with pytest.raises(ConfigError, match=match):
            AttackSettings.from_config({"name": "answer", "objective": ANSWER, **bad})


@pytest.mark.parametrize(("objective", "match"), [
    (None, "attack.objective is missing"),
    ({"answer_weight": 1}, "must be null .no attack. or a config with a _target_"),
    ({"_target_": "no_such_module.Objective"}, "cannot be imported"),
    ({"_target_": "facet_probe.attack.config.AttackSettings"}, "not a subclass of"),
    ({**ANSWER, "kl_weight": 1.0}, r"unknown attack.objective setting\(s\) \['kl_weight'\]"),
    ({**ANSWER, "answer_weight": "heavy"}, "attack.objective.answer_weight must be a finite number"),
    ({**STOP, "sequence": "forced"}, "attack.objective.sequence must be one of own_reply, template; got 'forced'"),
])
def test_the_objective_node_is_a_typed_target_config(objective, match):
    node = {"name": "x"} if objective is None else {"name": "x", "objective": objective}
    with pytest.raises(ConfigError, match=match):
        AttackSettings.from_config(node)


def test_the_stop_reasoning_sequence_is_typed_with_the_reference_as_default():
    from facet_probe.attack.objectives import StopSequence

    assert AttackSettings.from_config({"name": "stop_reasoning", "objective": STOP}).objective.sequence \
        is StopSequence.OWN_REPLY
    s = AttackSettings.from_config({"name": "stop_reasoning", "objective": {**STOP, "sequence": "template"}})
    assert s.objective.sequence is StopSequence.TEMPLATE and s.as_dict()["objective"]["sequence"] == "template"


def test_the_stop_reasoning_end_of_reply_is_the_familys_turn_end_unless_set_to_the_eos():
    from facet_probe.attack.objectives import EndOfReply

    assert AttackSettings.from_config({"name": "stop_reasoning", "objective": STOP}).objective.end_of_reply \
        is EndOfReply.TURN
    s = AttackSettings.from_config({"name": "stop_reasoning", "objective": {**STOP, "end_of_reply": "eos"}})
    assert s.objective.end_of_reply is EndOfReply.EOS and s.objective.changed_settings() == {"end_of_reply": "eos"}
    with pytest.raises(ConfigError, match=r"^attack.objective.end_of_reply must be one of turn, eos; got '</s>'$"):
        AttackSettings.from_config({"name": "stop_reasoning", "objective": {**STOP, "end_of_reply": "</s>"}})


def test_the_settings_record_holds_every_objective_setting_with_its_target():
    s = AttackSettings.from_config({"name": "stop_reasoning", "objective": {**STOP, "template_weight": 2}})
    assert s.as_dict()["objective"] == {**STOP, "answer_weight": 1.0, "template_weight": 2.0,
                                        "sequence": "own_reply", "end_of_reply": "turn"}
    assert AttackSettings.from_config({"name": "none", "objective": None}).as_dict()["objective"] is None


def test_run_names_group_the_attacks_of_one_budget():
    assert budget_label(16 / 255) == "16" and budget_label(0.05) == "0.05"
    a = attack_run_name("m", "d", "answer", True, "16/255", "1/255", 200, 10, 0)
    b = attack_run_name("m", "d", "stop_reasoning", False, 16 / 255, 1 / 255, 200, 10, 0)
    assert a == "m/d/eps16-a1-s200-u10/answer-cot" and b == "m/d/eps16-a1-s200-u10/stop_reasoning-direct"
    assert attack_run_name("m", "d", "none", True, "8/255", "1/255", 200, 10, 3) == "m/d/eps8-a1-s200-u10-seed3/none-cot"


def test_an_adapter_run_gets_a_folder_of_its_own_beside_the_base_models(composed):
    base = composed().run_name
    one = composed("model.adapter=/ckpt/a/lora-ceqa").run_name
    other = composed("model.adapter=/ckpt/b/lora-ceqa").run_name
    assert one.startswith("tiny_vlm+lora-ceqa-") and one.split("/", 1)[1] == base.split("/", 1)[1]
    assert len({base, one, other}) == 3  # same folder name, another path: another run folder


@pytest.fixture
def composed():
    register()
    GlobalHydra.instance().clear()
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        yield lambda *ov: compose("attack_app", overrides=list(ov), return_hydra_config=True)
    GlobalHydra.instance().clear()


def test_the_app_config_has_the_paper_defaults_and_the_eps_ablation_is_one_override(composed):
    cfg = composed()
    s = AttackSettings.from_config(cfg.attack)
    assert (s.name, s.eps, s.alpha, s.steps, s.update_every) == ("stop_reasoning", 16 / 255, 1 / 255, 200, 10)
    assert cfg.model.name == "tiny_vlm" and cfg.dataset.name == "synthetic_visual_mcq" and cfg.prompt.cot
    assert cfg.run_name == "tiny_vlm/synthetic_visual_mcq/eps16-a1-s200-u10/stop_reasoning-cot"
    # `-m` alone sweeps the paper grid: three attacks, with and without CoT
    assert dict(cfg.hydra.sweeper.params) == {"attack": "answer,rationale,stop_reasoning", "prompt.cot": "true,false"}
    cfg = composed("attack=answer", "attack.eps=8/255", "prompt.cot=false")
    assert AttackSettings.from_config(cfg.attack).eps == pytest.approx(8 / 255)
    assert cfg.run_name.endswith("eps8-a1-s200-u10/answer-direct")
    for name, needs_cot in (("none", False), ("answer", False), ("rationale", True), ("stop_reasoning", True)):
        s = AttackSettings.from_config(composed(f"attack={name}").attack)
        assert s.name == name and (s.objective is None) == (name == "none") and s.needs_rationale == needs_cot


def test_a_misspelt_top_level_key_fails_at_composition(composed):
    with pytest.raises(Exception, match="limt"):
        composed("limt=3")
