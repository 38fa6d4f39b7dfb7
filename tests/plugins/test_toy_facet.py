"""Done-when of the facet plug-in contract: a facet from a test folder (a module on sys.path, a config on the
search path, no package file edited) runs end to end through `python -m facet_probe`, its own prompt and all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import facet_probe
from facet_probe.core.items import Item
from facet_probe.facets import FACETS
from facet_probe.facets.examples import __main__ as examples
from facet_probe.facets.layout import preview
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
TOY = Path(__file__).resolve().parent / "toy_facet"


def audit(run_dir: Path, *overrides: str, module_on_path: bool = True, rc: int = 0) -> Ran:
    """The toy facet's audit: in this process with the toy folder on sys.path (the `clue_order` fixture puts it
    there), or, `module_on_path=False`, in a process of its own whose path lacks it."""
    args = [f"hydra.run.dir={run_dir}", "progress=false", "model=oracle", "facet=clue_order",
            f"hydra.searchpath=[file://{TOY / 'conf'}]", *overrides]
    if module_on_path:
        assert str(TOY) in sys.path, "use the clue_order fixture: it puts the toy folder on sys.path"
        proc = run_module("facet_probe", *args, cwd=ROOT)
    else:  # a real process: this one may have imported clue_order already, and the module must be off the path
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "facet_probe", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
    assert proc.returncode == rc, f"audit gave {proc.returncode}, not {rc}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def clue_order(monkeypatch):
    monkeypatch.syspath_prepend(str(TOY))
    from clue_order import ClueOrder

    return ClueOrder


def rendered_as_the_toy_facet(run: Path, facet_cls) -> list[dict]:
    """The run's trials, each checked to carry the hash of the toy facet's own rendering of its ordering."""
    items = {i.item_id: i for i in (Item.model_validate_json(line)
                                    for line in (run / "items.jsonl").read_text().splitlines())}
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    facet = facet_cls()
    for t in trials:
        assert t["facet"] == "clue_order" and t["parse_status"] == "ok" and t["correct"]
        assert t["prompt_hash"] == facet.render(items[t["item_id"]], t["permutation"], t["mode"]).hash
    return trials


def test_the_toy_facet_is_in_no_package_file():
    assert "clue_order" not in FACETS
    assert not [p for p in Path(facet_probe.__file__).parent.rglob("*.*")
                if p.suffix in (".py", ".yaml") and "clue_order" in p.read_text()]


def test_a_toy_facet_from_a_test_folder_audits_a_synthetic_dataset(tmp_path, clue_order):
    run = tmp_path / "run"
    audit(run, "dataset=synthetic_evidence", "limit=3")
    trials = rendered_as_the_toy_facet(run, clue_order)
    assert len(trials) == 3 * 6 and json.loads((run / "run_status.json").read_text())["state"] == "complete"
    item = Item.model_validate_json((run / "items.jsonl").read_text().splitlines()[0])
    text = clue_order().render(item, range(len(clue_order().orderables(item)))).messages[0].parts[0].text
    assert text.startswith("Clues, in no particular order:\n\nChunk 1: ")


def test_a_toy_facets_own_component_kind_audits_an_items_file(tmp_path, clue_order):
    example = clue_order.example()
    items = [example.model_copy(update={"item_id": f"mine::{i}", "dataset": "mine"}) for i in range(2)]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(i.model_dump_json() + "\n" for i in items))
    run = tmp_path / "run"
    audit(run, "dataset=items_jsonl", f"dataset.path={path}", "k=2")
    assert len(rendered_as_the_toy_facet(run, clue_order)) == 2 * 2
    prompt = clue_order().render(items[0], (1, 0))
    assert prompt.system == clue_order.system and "Clue 1: Ann wore red.\n\nClue 2: The thief" in prompt.messages[0].parts[0].text


@pytest.mark.slow
def test_a_facet_config_whose_module_is_off_the_path_fails_with_one_line(tmp_path):
    err = audit(tmp_path / "run", "dataset=synthetic_evidence", "limit=1", module_on_path=False, rc=2).stderr
    assert "facet config clue_order: _target_ 'clue_order.ClueOrder' cannot be imported" in err
    assert "PYTHONPATH" in err and "Traceback" not in err and not (tmp_path / "run" / "trials.jsonl").exists()


def test_the_examples_tool_previews_a_toy_facet_from_a_test_folder(clue_order, capsys):
    """`python -m facet_probe.facets.examples clue_order hydra.searchpath=[file://<dir>]`, in-process."""
    examples.main(["clue_order", "--cot", f"hydra.searchpath=[file://{TOY / 'conf'}]"])
    shown = capsys.readouterr().out
    item = clue_order.example()
    assert shown.startswith("clue_order, permutation [1, 0]:\n[system] You are a careful detective.")
    assert preview(clue_order().render(item, (1, 0), "cot")) in shown  # exactly the facet's own rendering


def test_the_examples_tool_names_the_known_facets_for_an_unknown_one(clue_order):
    proc = run_module("facet_probe.facets.examples", "clue_ordr", f"hydra.searchpath=[file://{TOY / 'conf'}]", cwd=ROOT)
    known = ", ".join([*FACETS, "clue_order"])  # the toy's rank is the default: listed after the built-in ones
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: unknown facet 'clue_ordr'; known: {known} (a facet of your own: "
                                        "its config in <dir>/facet/<name>.yaml, with hydra.searchpath=[file://<dir>])"]
