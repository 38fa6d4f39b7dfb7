"""Issue 66 (2): facet_probe_dev/vllm_resolution.py reads pip's `--dry-run --report` of vLLM beside the dev install
(tests/fixtures/pip_report_vllm.json, cut from a real report) as the changes and breakages it would bring."""

from __future__ import annotations

import json
from pathlib import Path

from facet_probe_dev.vllm_resolution import Broken, broken, changes, describe, planned

REPORT = json.loads((Path(__file__).parents[1] / "fixtures" / "pip_report_vllm.json").read_text())
#: the dev venv's versions of the packages the report touches (2026-12-06), and a made-up app that needs the newer ones
INSTALLED = {"fastapi": "0.165.0", "numba": "0.65.1", "numpy": "2.4.6", "torch": "2.13.0+cpu", "pandas": "3.1.1",
             "an-app": "1.0"}
REQUIRES = {"an-app": ["fastapi>=0.140", "numpy>=2.4; python_version >= '3.8'", "pytest; extra == 'test'"],
            "pandas": ["numpy>=1.26"]}


def test_the_report_beside_the_dev_install_is_three_downgrades():
    plan = planned(REPORT)
    assert plan == {"vllm": "0.30.0", "fastapi": "0.136.3", "numba": "0.65.0", "numpy": "2.3.5"}
    assert [(c.name, c.installed, c.planned, c.kind) for c in changes(plan, INSTALLED)] == [
        ("fastapi", "0.165.0", "0.136.3", "downgrade"), ("numba", "0.65.1", "0.65.0", "downgrade"),
        ("numpy", "2.4.6", "2.3.5", "downgrade")]


def test_installed_packages_whose_requirements_the_plan_breaks_are_named_extras_left_out():
    assert broken(planned(REPORT), INSTALLED, REQUIRES) == [
        Broken("an-app", "fastapi>=0.140", "0.136.3"),
        Broken("an-app", 'numpy>=2.4; python_version >= "3.8"', "2.3.5")]


def test_a_local_build_label_is_no_change():
    assert changes({"torch": "2.13.0"}, {"torch": "2.13.0+cpu"}) == []


def test_each_way_prints_what_it_would_do_and_a_failed_resolution_its_conflict():
    lines = describe("beside the dev install", REPORT, "", INSTALLED, REQUIRES)
    assert lines[0] == ("beside the dev install: resolves; 4 packages to install, 3 installed ones changed, "
                        "2 installed ones broken")
    assert "  downgrade: fastapi 0.165.0 -> 0.136.3" in lines
    assert "  broken: an-app needs fastapi>=0.140, would find 0.136.3" in lines
    stderr = ("ERROR: Cannot install vllm==0.30.0 because these package versions have conflicting dependencies.\n\n"
              "The conflict is caused by:\n    The user requested fastapi==0.165.0\n"
              "    vllm 0.30.0 depends on fastapi<0.137.0,>=0.133.0\n\nTo fix this you could try to:\n"
              "1. loosen the range of package versions you've specified\n")
    assert describe("beside", None, stderr, {}, {}) == [
        "beside: does NOT resolve", "  The conflict is caused by:", "      The user requested fastapi==0.165.0",
        "      vllm 0.30.0 depends on fastapi<0.137.0,>=0.133.0"]
