"""Where a checkpoint keeps its chat template: every layout the hub has used, newest first.

transformers 5.x tokenizers read `chat_template.jinja` (and `tokenizer_config.json`'s `chat_template`), but
older multimodal checkpoints (e.g. `llava-hf/llava-1.5-7b-hf`) ship it only in the processor's
`chat_template.json`; the adapters build their processors themselves, so nothing else would read that file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from facet_probe.runners.base import RunnerError

log = logging.getLogger("facet_probe.runners.hf")
_ORDER_MARKS = ("FPORDER0", "FPORDER1", "FPORDER2")

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


def checkpoint_template(tokenizer, processor, folder: Path | None) -> tuple[str | None, str | None]:
    """(where it was found, the checkpoint's template): the processor's, the tokenizer's, else a file of the
    folder in any layout the hub has used (`folder_template`); (None, None) when there is none."""
    for source, template in (("processor", getattr(processor, "chat_template", None)),
                             ("tokenizer", getattr(tokenizer, "chat_template", None))):
        if isinstance(template, str) and template.strip():
            return source, template
    found = folder_template(folder) if folder is not None else None
    return found if found is not None else (None, None)


def keeps_order(tokenizer, template: str, placeholder: str, options: dict[str, Any]) -> bool:
    """Render text, image, text, image, text and check the five pieces come out in that order."""
    a, b, c = _ORDER_MARKS
    msgs = [{"role": "user", "content": [{"type": "text", "text": a}, {"type": "image"}, {"type": "text", "text": b},
                                         {"type": "image"}, {"type": "text", "text": c}]}]
    text = tokenizer.apply_chat_template(msgs, chat_template=template, add_generation_prompt=True, tokenize=False,
                                         **options)
    i_a, i_b, i_c = text.find(a), text.find(b), text.find(c)
    first = text.find(placeholder, i_a)
    second = text.find(placeholder, first + len(placeholder)) if first >= 0 else -1
    return 0 <= i_a < first < i_b < second < i_c and text.count(placeholder) == 2


def choose_template(name: str, family: str, configured: str | None, found: tuple[str | None, str | None],
                    fallback: str | None, keeps: Callable[[str], bool], folder: Path | None) -> tuple[str, str]:
    """(template, label): the configured one, else the checkpoint's if it keeps images at their slots, else the
    family's order-preserving `fallback` (also when the checkpoint has none); otherwise one `RunnerError`."""
    if configured is not None:
        if not keeps(configured):
            raise RunnerError(f"{name}: model.chat_template renders images out of their displayed order")
        return configured, "config"
    source, template = found
    if template is None and fallback is not None:
        log.warning("%s: the checkpoint has no chat template (looked in the tokenizer and %s); using the "
                    "adapter's %s conversation format", name, ", ".join(TEMPLATE_FILES), family)
        return fallback, f"facet_probe {family} (checkpoint has no chat template)"
    if template is None:
        raise RunnerError(f"{name}: the checkpoint has no chat template (looked in the tokenizer and "
                          f"{', '.join(TEMPLATE_FILES)} of {folder}); set model.chat_template")
    if keeps(template):
        return template, f"checkpoint ({source})"
    if fallback is None:
        raise RunnerError(f"{name}: the checkpoint's chat template renders images out of their displayed "
                          "order; set model.chat_template to one that keeps them at their slots")
    log.warning("%s: the checkpoint's chat template moves images away from their slots; using the adapter's "
                "%s conversation format instead", name, family)
    return fallback, f"facet_probe {family} (checkpoint template reorders images)"
