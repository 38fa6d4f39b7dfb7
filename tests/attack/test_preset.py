"""The reference's prompt preset and ScienceQA selection, as switches (attack.preset)."""

from __future__ import annotations

import pytest
from helpers import attack_settings

from facet_probe.attack.preset import REFERENCE_COT_INSTRUCTION, PromptPreset, Selection, selected
from facet_probe.attack.run import build_samples
from facet_probe.core.items import make_item
from facet_probe.core.prompts import ImagePart, PromptMode
from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ


def test_the_reference_prompt_is_question_choices_and_its_cot_instruction():
    item = SyntheticVisualMCQ(name="synthetic_visual_mcq", n=1, seed=42).load()[0]
    (ref,) = build_samples([item], PromptMode.COT, attack_settings(), 0, PromptPreset.REFERENCE)
    (own,) = build_samples([item], PromptMode.COT, attack_settings(), 0)
    choices = ", ".join(f"({chr(65 + i)}) {c}" for i, c in enumerate(item.choices))
    (message,) = ref.prompt.messages
    assert isinstance(message.parts[0], ImagePart) and ref.prompt.system == ""
    assert message.text() == f"Question: {item.question}\nChoices: {choices}\n{REFERENCE_COT_INSTRUCTION}"
    assert ref.gold == own.gold and ref.prompt.hash != own.prompt.hash and ref.options == tuple(item.choices)


def test_the_reference_selection_drops_scienceqa_state_capitals():
    items = [make_item(item_id=f"s::{i}", dataset="s", question="Q?", choices=("a", "b"), gold_index=0,
                       answer_type="mcq", metadata={"category": cat})
             for i, cat in enumerate(["State capitals", "Weather and climate"])]
    assert [it.item_id for it in selected(items, Selection.REFERENCE)] == ["s::1"]
    assert selected(items, Selection.PROJECT) == items


@pytest.mark.slow
def test_a_run_with_the_reference_preset_does_not_resume_as_the_projects(tmp_path, answering_path):
    from test_attack_app import config, rows

    from facet_probe.attack.run import run_attack
    from facet_probe.core.errors import ConfigError

    fast = ["attack=answer", "limit=1", "attack.steps=1", "attack.update_every=1"]
    cfg = config(tmp_path, answering_path, *fast, "prompt.preset=reference")
    run_dir = tmp_path / "attack" / cfg.run_name
    run_attack(cfg, run_dir)
    assert len(rows(run_dir)) == 1
    with pytest.raises(ConfigError, match="other settings [(]prompt_preset differ[)]"):
        run_attack(config(tmp_path, answering_path, *fast), run_dir)
    with pytest.raises(ConfigError, match="prompt.preset must be one of project, reference; got 'paper'"):
        run_attack(config(tmp_path, answering_path, *fast, "prompt.preset=paper"), tmp_path / "other")
