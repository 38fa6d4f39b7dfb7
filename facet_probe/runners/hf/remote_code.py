"""Can a checkpoint's own Python code (trust_remote_code) run on the installed transformers? Read, not run.

Kimi-VL ships its model as hub code written for transformers 4.x; transformers 5 removed some of what it
calls (`DynamicCache.get_usable_length`, helpers it imports). Loading it would fail deep inside the first
forward, after the weights loaded. This module reads the remote code with `ast` before anything loads:
every `from transformers... import name` must resolve, and every method called on a cache object
(`past_key_value(s)`, `*cache*`) must exist on `transformers.DynamicCache`. The declared version is the
checkpoint's `config.json` `transformers_version` (what its code was saved with).
"""

from __future__ import annotations

import ast
import importlib
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing the remote code needs that the installed transformers lacks."""

    file: str
    line: int
    what: str  # e.g. "calls past_key_value.get_usable_length (DynamicCache has no such method)"

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.what}"


def remote_modules(folder: Path) -> list[Path]:
    """The Python files `config.json`'s `auto_map` names (local modules only, not `repo--module` references)."""
    auto_map = json.loads((folder / "config.json").read_text()).get("auto_map", {})
    refs = [r for v in auto_map.values() for r in (v if isinstance(v, list) else [v]) if isinstance(r, str)]
    return sorted({folder / f"{r.split('.')[0]}.py" for r in refs if "--" not in r})


def declared_transformers(folder: Path) -> str | None:
    """The transformers version the checkpoint (and its code) was saved with."""
    return json.loads((folder / "config.json").read_text()).get("transformers_version")


def _resolves(module: str, name: str) -> bool:
    try:
        mod = importlib.import_module(module)
    except Exception:
        return False
    if hasattr(mod, name):
        return True
    try:  # a submodule imported by name
        importlib.import_module(f"{module}.{name}")
        return True
    except Exception:
        return False


def _is_cache_name(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "past_key_value" in name or name.lower().endswith("cache")  # not cache_position (a tensor)


def problems_in(source: str, file: str) -> list[Problem]:
    """What `source` imports from transformers or calls on a cache object that the installed version lacks."""
    from transformers import DynamicCache

    out = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "transformers":
            for alias in node.names:
                if alias.name != "*" and not _resolves(node.module, alias.name):
                    out.append(Problem(file, node.lineno, f"imports {alias.name} from {node.module} (not there)"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and _is_cache_name(node.func.value) and not hasattr(DynamicCache, node.func.attr)):
            target = ast.unparse(node.func.value)
            out.append(Problem(file, node.lineno, f"calls {target}.{node.func.attr} (DynamicCache has no such "
                                                  "method)"))
    return out


def remote_code_problems(folder: Path) -> list[Problem]:
    """Every problem of every remote module of `folder` (missing files are the caller's message)."""
    return [p for path in remote_modules(folder) if path.is_file()
            for p in problems_in(path.read_text(encoding="utf-8"), path.name)]
