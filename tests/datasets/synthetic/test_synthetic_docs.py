"""docs/synthetic.md shows, for every set, the item the generator produces now."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synthetic_samples import SET_NAMES

from facet_probe.datasets.synthetic.__main__ import example, main

DOC = Path(__file__).resolve().parents[3] / "docs" / "synthetic.md"


@pytest.mark.parametrize("name", SET_NAMES)
def test_the_documented_example_is_the_generated_item(name):
    match = re.search(rf"^### {name}\n.*?```text\n(.*?)\n```", DOC.read_text(), flags=re.S | re.M)
    assert match, f"docs/synthetic.md has no example block for {name}"
    assert match.group(1) == example(name), "regenerate with: python -m facet_probe.datasets.synthetic " + name


def test_the_example_printer_lists_sets_and_refuses_unknown_ones(capsys):
    assert main(["synthetic_tools"]) == 0
    assert "## synthetic_tools" in capsys.readouterr().out
    assert main(["synthetic_nope"]) == 2
    assert "known: synthetic_dialog" in capsys.readouterr().err
