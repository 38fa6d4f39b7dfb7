"""The package's layout rule and its map: the stages bottom to top, the check that every import points down,
and the module map of docs/architecture.md, rendered from the code (`make architecture` rewrites it; the
test suite fails when the page and the code differ)."""

from __future__ import annotations

import ast
import graphlib
import re
import sys
from pathlib import Path

import facet_probe

PACKAGE = Path(facet_probe.__file__).parent
DOC = PACKAGE.parent / "docs" / "architecture.md"
BEGIN, END = "<!-- module map: begin (make architecture) -->", "<!-- module map: end -->"

#: The stages, bottom to top: a module may import its own stage and the stages below it, never one above.
#: Stages on one line are peers: neither imports the other. Entry points (`__main__.py`) and the root's
#: modules (the Python API, the audit app) stand on top of every stage.
STACK = [
    ["core"],
    ["store"],
    ["config"],
    ["facets", "datasets"],
    ["scoring"],
    ["runners"],
    ["audit"],
    ["metrics"],
    ["decoder"],
    ["judge", "attack"],
    ["report"],
    ["odi"],
    ["paper"],
    ["app", "explore"],
]
TOP = len(STACK)
#: Not stages: the import-time plumbing (old paths) and package data.
PLUMBING = {"_moved", "assets", "conf"}


def rank(stage: str) -> int:
    """Where a stage stands; the root's own modules stand on top."""
    return next((i for i, peers in enumerate(STACK) if stage in peers), TOP)


def stage_of(module: str) -> str:
    """facet_probe.<stage>.x -> <stage>; a root module is its own stage."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, package: Path = PACKAGE) -> bool:
    """Whether `name` (facet_probe.a.b) is a module or subpackage of the package."""
    path = package.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, imported facet_probe module) of every import in the file, at module level or in a function;
    `from a import b` imports the module `a.b` where `b` is one."""
    module = module_name(path, package)
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = base.split(".")
            target = ".".join(parts[: len(parts) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            named = [f"{target}.{a.name}" for a in node.names]
            found += [(node.lineno, t) for t in dict.fromkeys(
                t if is_module(t, package) or target == "facet_probe" else target for t in named)]
    return [(line, t) for line, t in found if t.split(".")[0] == "facet_probe"]


def upward_imports(package: Path = PACKAGE) -> list[str]:
    """'file:line imports module (stage a -> stage b)' for every import that points up, or sideways to a peer."""
    bad = []
    for path in sorted(package.rglob("*.py")):
        here = stage_of(module_name(path, package))
        mine = TOP if path.name == "__main__.py" else rank(here)
        for line, target in imports_of(path, package):
            there = stage_of(target)
            if there in PLUMBING or there == here:
                continue
            if rank(there) > mine or rank(there) == mine < TOP:
                bad.append(f"{path.relative_to(package.parent)}:{line} imports {target} ({here} -> {there})")
    return bad


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """The import cycles between the package's modules (imports in functions count: a cycle put off to call time
    is still a knot), each as the modules around it, first repeated at the end; [] for none."""
    graph = {module_name(p, package): {t for _, t in imports_of(p, package)} for p in package.rglob("*.py")}
    graph = {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    cycles = []
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
            return cycles
        except graphlib.CycleError as err:
            cycle = err.args[1]  # [a, b, ..., a], each importing the one before it
            cycles.append(cycle[::-1])
            graph[cycle[1]].discard(cycle[0])  # one of its imports set aside, to find the next cycle


def summary(path: Path) -> str:
    """A module's docstring, first paragraph, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return re.sub(r"\s+", " ", doc.split("\n\n")[0]).strip().replace("|", "\\|")


def module_map(package: Path = PACKAGE) -> str:
    """The map: per stage, top to bottom, what it owns and one line per module or subpackage."""
    out = []
    root = sorted(p.name for p in package.glob("*.py"))
    out += ["### the root (on top)", "", "| module | what it is |", "|---|---|"]
    out += [f"| `{name}` | {summary(package / name)} |" for name in root]
    for peers in reversed(STACK):
        for stage in peers:
            folder = package / stage
            out += ["", f"### `{stage}/` (stage {rank(stage)})", "", summary(folder / "__init__.py"), "",
                    "| module | what it is |", "|---|---|"]
            for p in sorted(folder.iterdir()):
                if p.suffix == ".py" and p.name != "__init__.py":
                    out.append(f"| `{p.name}` | {summary(p)} |")
                elif (p / "__init__.py").exists():
                    out.append(f"| `{p.name}/` | {summary(p / '__init__.py')} |")
    return "\n".join(out) + "\n"


def page_with_map(page: str, package: Path = PACKAGE) -> str:
    """docs/architecture.md with its map block rendered from the code."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{module_map(package)}{END}{tail}"


if __name__ == "__main__":
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"{DOC}: put the markers {BEGIN} and {END} where the map goes")
    DOC.write_text(page_with_map(text))
    print(f"wrote the module map into {DOC}")
