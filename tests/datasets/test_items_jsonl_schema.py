"""The items file's schema is published: `python -m facet_probe schema items` prints the JSON Schema generated from
the `Item` model, and docs/datasets.md's MCQ, evidence and image-set examples validate against it and load through
`dataset=items_jsonl` into items their facets can order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from facet_probe.app.schema_command import items_schema
from facet_probe.core.items import Item
from facet_probe.datasets.items_jsonl import ItemsJsonl
from facet_probe.facets.evidence_chunk_order import EvidenceChunkOrder
from facet_probe.facets.example_images import square_png
from facet_probe.facets.image_set_order import ImageSetOrder
from facet_probe.facets.option_order import OptionOrder
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]


def doc_examples() -> list[str]:
    """The JSON lines of docs/datasets.md's items section, in order."""
    text = (ROOT / "docs" / "datasets.md").read_text()
    section = text.split("### items_jsonl: your own items", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```jsonl\n(.*?)```", section, re.S) for line in block.splitlines() if line]


def test_the_schema_command_prints_the_item_models_schema():
    ran = run_module("facet_probe", "schema", "items")
    assert ran.returncode == 0, ran.stderr
    schema = json.loads(ran.stdout)
    assert schema == items_schema()
    assert schema["properties"].keys() == Item.model_json_schema()["properties"].keys()
    jsonschema.Draft202012Validator.check_schema(schema)


def test_an_unknown_schema_name_is_one_line_naming_the_ones_there_are():
    ran = run_module("facet_probe", "schema", "item")
    assert ran.returncode == 2
    (line,) = ran.stderr.strip().splitlines()
    assert line.startswith("error:") and "items" in line


def test_the_docs_examples_validate_and_load_as_items_their_facets_order(tmp_path):
    lines = doc_examples()
    assert len(lines) == 3
    validator = jsonschema.Draft202012Validator(items_schema())
    for line in lines:
        validator.validate(json.loads(line))
    (tmp_path / "red.png").write_bytes(square_png("red").read_bytes())
    (tmp_path / "blue.png").write_bytes(square_png("blue").read_bytes())
    (tmp_path / "items.jsonl").write_text("\n".join(lines) + "\n")
    mcq, evidence, images = ItemsJsonl(name="items_jsonl", path=str(tmp_path / "items.jsonl")).load_all()
    for facet, item in ((OptionOrder(), mcq), (EvidenceChunkOrder(), evidence), (ImageSetOrder(), images)):
        assert facet.unsupported_reason(item) is None, item.item_id


@pytest.mark.parametrize("line", [
    {"item_id": "q::1", "dataset": "q", "question": "Which?", "choices": ["a", "b"]},  # an MCQ item without its gold
    {"item_id": "q::2", "dataset": "q", "question": "Who?", "answer_type": "free"},  # a free item without its answer
    {"item_id": "q::3", "dataset": "q", "question": "Who?", "answer_type": "free", "gold_answer": "x",
     "components": [{"id": "c", "kind": "Clue", "text": "t"}]},  # a kind that is neither built in nor an identifier
    {"item_id": "q::4", "dataset": "q", "question": "Which?", "choices": ["a", "b"], "gold_index": 0,
     "fixed": [{"id": "f", "kind": "image", "image": {"sha256": "00"}}]},  # an image with neither path nor data
])
def test_the_schema_refuses_what_the_loader_refuses(line):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(line, items_schema())
