"""Settings dataclasses built from config nodes: each value checked against its field's type (an objective's or
the loop's settings), so a wrong value is one ConfigError naming its key, never a TypeError deep in a run."""

from __future__ import annotations

import math
import typing
from dataclasses import fields
from enum import Enum
from typing import Any

from facet_probe.core.errors import ConfigError, parse_enum


def typed_value(value: Any, kind: Any, what: str) -> Any:
    """`value` as the field type `kind` (float, int, bool, str, an Enum), or one ConfigError."""
    if isinstance(kind, type) and issubclass(kind, Enum):
        return parse_enum(kind, value, what)
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{what} must be true or false, got {value!r}")
        return value
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ConfigError(f"{what} must be a finite number, got {value!r}")
        if kind is int and value != int(value):
            raise ConfigError(f"{what} must be a whole number, got {value!r}")
        return kind(value)
    if kind is str and not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {value!r}")
    return value


def typed_instance(cls: type, raw: dict[str, Any], what: str, owner: str | None = None) -> Any:
    """`cls(**raw)` for a dataclass of settings, each value checked against its field's type; an unknown key is
    one ConfigError naming the valid ones (`owner`: the class as the config names it, e.g. its `_target_`)."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls) if f.init}
    if unknown := sorted(set(raw) - known):
        raise ConfigError(f"unknown {what} setting(s) {unknown}{f' for {owner}' if owner else ''}; "
                          f"valid: {sorted(known)}")
    return cls(**{k: typed_value(v, hints[k], f"{what}.{k}") for k, v in raw.items()})
