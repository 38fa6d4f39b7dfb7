"""Issue 66 (5): pyproject.toml states the torch and transformers the project supports, with floors that
facet_probe_dev/lowest_versions.py tests (the HF runner tests in a venv of their own; not run by CI)."""

from __future__ import annotations

from pathlib import Path

from facet_probe_dev.lowest_versions import TESTS, commands, declared_floors

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_states_the_floors_the_hf_runner_tests_passed_on():
    floors = declared_floors((ROOT / "pyproject.toml").read_text())
    assert (floors["transformers"], floors["torch"]) == ("5.21", "2.13")  # 5.4 and 5.17 fail those tests


def test_the_script_installs_the_floor_beside_the_torch_given_and_runs_the_hf_runner_tests():
    make, _, install, run = commands(Path("/tmp/v"), "5.21", "2.13.0")
    assert make[-1] == "/tmp/v" and {"torch==2.13.0", "transformers==5.21"} <= set(install)
    assert run[0] == "/tmp/v/bin/python" and set(TESTS) <= set(run) and "tests/runners/hf" in TESTS


def test_the_docs_record_the_outcome_at_the_floor():
    docs = (ROOT / "docs" / "hf_models.md").read_text()
    section = docs.split("## Supported versions", 1)[1].split("\n## ", 1)[0]
    assert "| 5.21.0 | 249 passed" in section and "python -m" in section and "facet_probe_dev.lowest_versions" in section
