"""`python -m facet_probe schema items`: the JSON Schema of an items file's lines, generated from the `Item` model.

The file form (`dataset=items_jsonl`, docs/datasets.md) adds to the model: image paths relative to the file, and
`data_b64`. A subcommand word, not a `key=value` override, so Hydra never sees it (`cli()` hands it here first)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from facet_probe.core.errors import EXIT_USER_ERROR
from facet_probe.core.items import PLUGIN_KIND, AnswerType, Item


def items_schema() -> dict[str, Any]:
    """The `Item` model's JSON Schema, plus the file form's rules: an image by `path` (relative to the items file),
    `data` or `data_b64` (base64); a component kind built in or a plug-in's lower-case identifier; an MCQ item's
    choices and gold index, another item's gold answer."""
    schema = Item.model_json_schema(mode="validation")
    defs = schema["$defs"]
    image = defs["ImageRef"]
    image["properties"]["path"]["description"] = "an image file, relative to the items file (or absolute)"
    image["properties"]["data_b64"] = {"type": "string", "description": "the image's bytes as base64 (as `data`)"}
    image["properties"]["sha256"]["description"] = "when given, checked against the bytes"
    image["anyOf"] = [{"required": [key]} for key in ("path", "data", "data_b64")]
    kind = defs["Component"]["properties"]["kind"]
    kind["anyOf"] = [{"$ref": "#/$defs/ComponentKind"}, {"type": "string", "pattern": f"^{PLUGIN_KIND.pattern}$"}]
    kind["description"] = "a built-in kind, or a plug-in facet's own (a lower-case identifier)"
    free = [t.value for t in AnswerType if t is not AnswerType.MCQ]
    schema["allOf"] = [{"if": {"properties": {"answer_type": {"enum": free}}, "required": ["answer_type"]},
                        "then": {"required": ["gold_answer"]},
                        "else": {"required": ["choices", "gold_index"]}}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **schema, "title": "facet_probe item (one line of an items JSONL file, dataset=items_jsonl)"}


#: The schemas the command prints, by name.
SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {"items": items_schema}


def schema_command(args: Sequence[str]) -> int:
    """Print the named schema as JSON (exit 0), or one line naming the schemas there are (exit 2)."""
    if len(args) != 1 or args[0] not in SCHEMAS:
        given = " ".join(args) or "no name"
        print(f"error: schema takes one name, got {given}; python -m facet_probe schema <name>, with <name> one of: "
              f"{', '.join(SCHEMAS)} (e.g. python -m facet_probe schema items > items.schema.json)", file=sys.stderr)
        return EXIT_USER_ERROR
    print(json.dumps(SCHEMAS[args[0]](), indent=2))
    return 0
