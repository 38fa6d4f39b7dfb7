"""Where a checkpoint keeps its chat template: every layout the hub has used, newest first.

transformers 5.x tokenizers read `chat_template.jinja` (and `tokenizer_config.json`'s `chat_template`), but
older multimodal checkpoints (e.g. `llava-hf/llava-1.5-7b-hf`) ship it only in the processor's
`chat_template.json`; the adapters build their processors themselves, so nothing else would read that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: the files looked at, in order (named in the message when none holds a template)
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json", "processor_config.json")


def _template_of(value: Any) -> str | None:
    """A template string, or the `default` of a list of named templates ({name, template})."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        return _template_of(named.get("default") or next(iter(named.values()), None))
    return None


def folder_template(folder: Path) -> tuple[str, str] | None:
    """(file name, template) of the first `TEMPLATE_FILES` entry in `folder` that holds one; None if none."""
    for name in TEMPLATE_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if name.endswith(".jinja"):
            template = _template_of(path.read_text(encoding="utf-8"))
        else:
            try:
                template = _template_of(json.loads(path.read_text(encoding="utf-8")).get("chat_template"))
            except (json.JSONDecodeError, AttributeError):
                template = None
        if template is not None:
            return name, template
    return None
