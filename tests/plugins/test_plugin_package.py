"""Plug-ins from other packages: a pip-installed package's facet, dataset and model work like the built-in ones.

The package (tests/plugins/toy_package: pyproject, a facet, a dataset and a model module, their configs, and a
Hydra SearchPathPlugin under `hydra_plugins/`) is built and installed offline into a folder of its own; with
that folder on PYTHONPATH, `python -m facet_probe model=last_candidate facet=hint_order dataset=hint_set`
audits it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from facet_probe.core.items import Item

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parent / "toy_package"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The toy package, pip-installed (offline, no dependencies) into a folder of its own."""
    src = shutil.copytree(PACKAGE, tmp_path_factory.mktemp("src") / "toy_package")
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(target), str(src)], check=True, capture_output=True, timeout=300)
    return target


def run(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_an_installed_packages_facet_dataset_and_model_audit_like_built_in_ones(tmp_path, site, monkeypatch):
    out = tmp_path / "run"
    run(site, "facet_probe", f"hydra.run.dir={out}", "progress=false", "model=last_candidate", "facet=hint_order",
        "dataset=hint_set", "k=2")
    monkeypatch.syspath_prepend(str(site))
    from fp_toy_plugin.hint_order import HintOrder

    items = {i.item_id: i for i in map(Item.model_validate_json, (out / "items.jsonl").read_text().splitlines())}
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert sorted(items) == ["hint_set::bee", "hint_set::cat", "hint_set::cow", "hint_set::owl"]
    assert len(trials) == 4 * 2 and all(t["facet"] == "hint_order" and t["correct"] for t in trials)
    assert {(t["model"], t["provenance"]["policy"]) for t in trials} == {("last_candidate", "last_candidate")}
    assert all(t["prompt_hash"] == HintOrder().render(items[t["item_id"]], t["permutation"], t["mode"]).hash
               for t in trials)


def test_the_facet_registry_lists_an_installed_packages_facet(site):
    shown = run(site, "facet_probe.facets.examples", "hint_order").stdout
    assert shown.startswith("hint_order, permutation [1, 0]:") and "Hint 1: It chases mice." in shown


def test_a_config_naming_a_package_that_is_not_installed_fails_with_one_line(tmp_path):
    """The package's dataset config on the search path without the package: what, where, what to do."""
    conf = tmp_path / "conf" / "dataset"
    conf.mkdir(parents=True)
    shutil.copy(PACKAGE / "fp_toy_plugin" / "conf" / "dataset" / "hint_set.yaml", conf)
    cmd = [sys.executable, "-m", "facet_probe", f"hydra.run.dir={tmp_path / 'run'}", "progress=false", "model=oracle",
           "facet=evidence_chunk_order", "dataset=hint_set", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("error: dataset: _target_ 'fp_toy_plugin.hint_set.HintSet' cannot be imported (ModuleNotFoundError("
            "\"No module named 'fp_toy_plugin'\")); put its module on PYTHONPATH or install its package") in proc.stderr
