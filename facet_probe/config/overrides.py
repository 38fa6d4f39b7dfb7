"""Python values as Hydra overrides: how the Python API and a run folder's name spell a setting
(`kappa=1.0`, `model.generation.temperature=0.7`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any


def set_fields(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields that differ from their defaults (nested dataclasses likewise)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            if nested := set_fields(value):
                out[f.name] = nested
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if value != default:
            out[f.name] = value
    return out


_PLAIN = re.compile(r"[A-Za-z_/~.][\w./:~-]*")
_NOT_STRINGS = {"true", "false", "null", "none", "nan", "inf", "-inf"}


def override_value(value: Any) -> str:
    """A Python value in Hydra's override grammar (strings quoted where they would read as something else)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _NOT_STRINGS:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
