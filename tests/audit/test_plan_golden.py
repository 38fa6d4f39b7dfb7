"""A plan is byte-identical across speed-ups (issue 44): the manifest rows, prompts, call keys and trial keys of a
small panel of every built-in facet (a mitigation instruction, repeats, a repeated ordering n! < K, both prompt
modes, two models, a legacy fingerprint, a shard), digested and pinned to what the code planned before planning
was made fast. A change here changes every stored run's keys: it must be deliberate, never a side effect."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from facet_probe.audit import plan as audit
from facet_probe.config.loading import load_option
from facet_probe.core.prompts import PromptMode
from facet_probe.core.trials import KEY_VERSION, fingerprint_hash, trial_key, trial_key_v1, trial_keys_of
from facet_probe.datasets.items_jsonl import ItemsJsonl
from facet_probe.facets.option_order import OptionOrder

FIXTURES = Path(__file__).parents[1] / "fixtures"
CELLS = [("option_order", "synthetic_mcq"), ("option_order", "synthetic_visual_mcq"),
         ("evidence_chunk_order", "synthetic_evidence"), ("document_rank_order", "synthetic_docs"),
         ("image_set_order", "synthetic_image_set"), ("mixed_modality_order", "synthetic_mixed"),
         ("dialog_turn_order", "synthetic_dialog"), ("few_shot_order", "synthetic_few_shot"),
         ("tool_description_order", "synthetic_tools")]
FP1, FP2 = fingerprint_hash({"model": "one"}), fingerprint_hash({"model": "two"})
OLD = fingerprint_hash({"model": "one", "old": True})

#: The digests of the code before issue 44's planning speed-ups (commit 640edc2).
MANIFEST_DIGEST = "b47634bde73f88686825f3000c29293086fefcf292f214be2e7ea92b052dc8ae"
PLAN_DIGEST = "93c355d502536d48b0c54ea5778465382f3aa8688a4b45227100d0105115a4d7"


def build_panel() -> tuple[list[audit.Cell], list]:
    cells = []
    for facet_name, dataset in CELLS:
        facet = instantiate(load_option("facet", facet_name))
        items = instantiate(OmegaConf.merge(load_option("dataset", dataset), {"n": 4})).load(limit=4)
        instruction = "Mind the order of the options." if dataset == "synthetic_mcq" else ""
        cells.append(audit.Cell(facet_name, facet, dataset, items, instruction=instruction))
    two = ItemsJsonl(name="items_jsonl", path=str(FIXTURES / "two_option_items.jsonl")).load()  # 2! < K = 6
    cells.append(audit.Cell("option_order", OptionOrder(), "items_jsonl", two))
    cfg = OmegaConf.create({"k": 6, "seed": 42, "repeats": 2})
    return cells, audit.build_run_manifest(cells, cfg)


@pytest.fixture(scope="module")
def panel() -> tuple[list[audit.Cell], list]:
    return build_panel()


def digest(lines) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(json.dumps(line, sort_keys=True, ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def plan_lines(plans: list[audit.PlannedTrial]):
    for p in plans:
        yield {"row": asdict(p.row), "item": p.item.item_id, "facet": p.facet.name, "model": p.trial_model,
               "prompt": p.prompt.to_json(), "prompt_hash": p.prompt.hash, "call_key": p.call_key,
               "trial_key": p.trial_key, "legacy_keys": list(p.legacy_keys), "legacy_provenance": p.legacy_provenance,
               "legacy_calls": [list(c) for c in p.legacy_calls], "instruction": p.instruction}


def all_plans(cells, rows) -> list[audit.PlannedTrial]:
    """Several models and settings over one panel, in an order that plans one prompt mode twice."""
    plans = []
    plans += audit.plan_trials(cells, rows, "one", FP1, PromptMode.DIRECT)
    plans += audit.plan_trials(cells, rows, "two", FP2, PromptMode.COT, share_repeated_orderings=True,
                               legacy_fingerprints=[(OLD, {"attention": "eager"})])
    plans += audit.plan_trials(cells, rows, "one_copy", FP1, PromptMode.DIRECT, shard="1/2")
    plans += audit.plan_trials(cells, rows, "two", FP2, PromptMode.COT)
    return plans


def test_the_manifest_of_a_panel_is_pinned(panel):
    _, rows = panel
    assert len(rows) == 9 * 4 * 6 * 2 + 3 * 6 * 2  # nine synthetic cells of 4 items, the 3 two-option items
    assert digest(asdict(r) for r in rows) == MANIFEST_DIGEST


def test_the_prompts_and_keys_of_a_panel_are_pinned(panel):
    cells, rows = panel
    assert digest(plan_lines(all_plans(cells, rows))) == PLAN_DIGEST


def test_the_models_of_a_panel_share_each_rendered_prompt(panel):
    """A prompt depends on no model setting: it is rendered once per (item, ordering, mode) and every model's
    plan holds that one prompt (18 models used to render and hash it 18 times)."""
    cells, rows = panel
    one = audit.plan_trials(cells, rows, "one", FP1, PromptMode.DIRECT)
    two = audit.plan_trials(cells, rows, "two", FP2, PromptMode.DIRECT)
    assert all(a.prompt is b.prompt for a, b in zip(one, two, strict=True))
    cot = audit.plan_trials(cells, rows, "two", FP2, PromptMode.COT)
    assert not any(a.prompt is c.prompt for a, c in zip(one, cot, strict=True))


def test_a_cell_changed_after_planning_is_rendered_anew(panel):
    """The shared prompts never outlive what they were rendered from: a new instruction, facet or item list."""
    cells, rows = build_panel()
    cell = cells[2]  # evidence_chunk_order, no instruction
    before = {p.row: p.prompt for p in audit.plan_trials(cells, rows, "one", FP1, PromptMode.DIRECT)}
    cell.instruction = "Read every chunk."
    after = [p for p in audit.plan_trials(cells, rows, "one", FP1, PromptMode.DIRECT) if p.row.facet == cell.facet_name]
    assert after and all(p.prompt.system.endswith("\n\nRead every chunk.") for p in after)
    assert all(p.prompt.hash != before[p.row].hash for p in after)
    cell.items = [item.model_copy(update={"question": item.question + " (again)"}) for item in cell.items]
    again = [p for p in audit.plan_trials(cells, rows, "one", FP1, PromptMode.DIRECT) if p.row.facet == cell.facet_name]
    assert all("(again)" in p.prompt.messages[-1].text() for p in again)
    cell.facet = type(cell.facet)()
    assert all(p.facet is cell.facet for p in audit.plan_trials(cells, rows, "one", FP1, PromptMode.DIRECT)
               if p.row.facet == cell.facet_name)


def test_the_keys_of_a_trial_are_its_two_schemes():
    """`trial_keys_of` formats the row once for both schemes; its keys are `trial_key`'s and `trial_key_v1`'s."""
    args = ("option_order", "synthetic_mcq::000007", 3, 42, 6)
    assert trial_keys_of("c" * 24, "model", *args) == {trial_key("c" * 24, "model", *args): KEY_VERSION,
                                                       trial_key_v1("c" * 24, *args): 1}
