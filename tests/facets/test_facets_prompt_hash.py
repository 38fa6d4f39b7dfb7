"""The prompt hash identifies what the model saw: exact text and image digests, stable across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from facet_test_helpers import comp, facet_items, png

from facet_probe.core.items import make_item
from facet_probe.facets import FACETS

PERM = (2, 0, 3, 1)


@pytest.mark.parametrize("name", list(FACETS))
def test_hash_changes_with_order_and_is_deterministic(items, name):
    facet = FACETS[name]()
    item = items[name]
    hashes = {facet.render(item, p).hash for p in [(0, 1, 2, 3), PERM, (3, 2, 1, 0)]}
    assert len(hashes) == 3
    assert facet.render(item, PERM).hash == facet.render(item, list(PERM)).hash
    assert facet.render(item, PERM) == facet.render(item, PERM)


def _image_item(color):
    return make_item(item_id="t::h", dataset="t", question="q?", choices=("a", "b"), gold_index=0,
                     components=(comp("i0", "image", image=png("red")), comp("i1", "image", image=png(color))))


def test_hash_changes_with_an_images_bytes_alone():
    facet = FACETS["image_set_order"]()
    a, b = facet.render(_image_item("blue"), (1, 0)), facet.render(_image_item((0, 0, 254)), (1, 0))
    assert [m.text() for m in a.messages] == [m.text() for m in b.messages]
    assert a.hash != b.hash


def test_hash_changes_with_any_text():
    facet = FACETS["option_order"]()
    base = make_item(item_id="t::h", dataset="t", question="q?", choices=("a", "b"), gold_index=0)
    other = make_item(item_id="t::h", dataset="t", question="q?", choices=("a", "b "), gold_index=0)
    other2 = make_item(item_id="t::h", dataset="t", question="q ?", choices=("a", "b"), gold_index=0)
    hashes = {facet.render(i, (0, 1)).hash for i in (base, other2)} | {facet.render(base, (0, 1), "cot").hash}
    assert len(hashes) == 3
    assert facet.render(other, (0, 1)).hash == facet.render(base, (0, 1)).hash  # text is stripped


def test_hash_is_identical_in_another_process(items):
    here = {name: FACETS[name]().render(items[name], PERM, "cot").hash for name in FACETS}
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "from facet_test_helpers import facet_items; from facet_probe.facets import FACETS;"
        "items = facet_items();"
        "print(json.dumps({n: FACETS[n]().render(items[n], (2, 0, 3, 1), 'cot').hash for n in FACETS}))")
    # a real process: a fresh interpreter with another PYTHONHASHSEED is what this checks
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], check=True,
                         capture_output=True, text=True, env={"PYTHONHASHSEED": "123", "PATH": ""},
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert json.loads(out) == here
    assert facet_items()["option_order"] == items["option_order"]
