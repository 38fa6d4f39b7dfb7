"""Can a checkpoint's own Python code (trust_remote_code) run on the installed transformers? Read, not run.

Kimi-VL ships its model as hub code written for transformers 4.x; transformers 5 removed some of what it
calls (`DynamicCache.get_usable_length`, helpers it imports). Loading it would fail deep inside the first
forward, after the weights loaded. This module reads the remote code with `ast` before anything loads:
every `from transformers... import name` must resolve, and every method called on a cache object
(`past_key_value(s)`, `*cache*`) must exist on `transformers.DynamicCache`. The declared version is the
checkpoint's `config.json` `transformers_version` (what its code was saved with).

The code read is everything the checkpoint's `auto_map`s name, in every file that has one (`config.json` for
the model, `tokenizer_config.json`, `processor_config.json`, `preprocessor_config.json` for the tokenizer and
processor, which load after the weights), and every module of the folder those import relatively, followed
transitively (as transformers' dynamic-module loader copies them): a helper is checked like the file
naming it.
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


#: the files whose `auto_map` names remote code: the model's config, then what loads after the weights
AUTO_MAP_FILES = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json",
                  "video_preprocessor_config.json")


def auto_map_modules(folder: Path) -> list[Path]:
    """The Python files the folder's `auto_map`s name (`AUTO_MAP_FILES`; local modules only, not
    `repo--module` references), present or not."""
    refs: list[str] = []
    for name in AUTO_MAP_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            continue
        auto_map = data.get("auto_map") if isinstance(data, dict) else None
        for value in (auto_map or {}).values():
            refs += [r for r in (value if isinstance(value, list) else [value]) if isinstance(r, str)]
    return sorted({folder / f"{r.rsplit('.', 1)[0].replace('.', '/')}.py" for r in refs if "--" not in r})


def relative_imports(source: str, path: Path, folder: Path) -> list[Path]:
    """The module files `source` (the file at `path`) imports relatively (`from .x import y`, `from . import
    x`), resolved inside `folder`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ImportFrom) and node.level > 0):
            continue
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        names = [node.module] if node.module else [alias.name for alias in node.names]
        for name in names:
            target = base.joinpath(*name.split("."))
            package = target / "__init__.py"
            out.append(package if package.is_file() else target.with_suffix(".py"))
    return [p for p in out if p.resolve().is_relative_to(folder.resolve())]


def remote_modules(folder: Path) -> list[Path]:
    """Every Python file of the remote code: those the `auto_map`s name and, transitively, those they import
    relatively (present or not)."""
    seen: set[Path] = set()
    todo = auto_map_modules(folder)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path.is_file():
            todo += relative_imports(path.read_text(encoding="utf-8"), path, folder)
    return sorted(seen)


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
        if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.split(".")[0] == "transformers"):
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
    """Every problem of every remote module of `folder` (`remote_modules`; missing files are the caller's
    message: `missing_modules`)."""
    out = []
    for path in remote_modules(folder):
        if path.is_file():
            name = str(path.relative_to(folder))
            try:
                out += problems_in(path.read_text(encoding="utf-8"), name)
            except SyntaxError as exc:
                out.append(Problem(name, exc.lineno or 0, f"cannot be parsed ({exc.msg})"))
    return out


def missing_modules(folder: Path) -> list[str]:
    """The remote modules (`remote_modules`) that are not in `folder`, by their path in it."""
    return [str(p.relative_to(folder)) for p in remote_modules(folder) if not p.is_file()]
