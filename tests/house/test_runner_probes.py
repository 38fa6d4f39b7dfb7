"""What a runner offers beyond `Runner` is declared (runners/base.py: `declared`), never probed: no module asks
`hasattr(runner, ...)` / `getattr(runner, ...)` of a runner, a wrapped runner or an attack's adapter, and no runner
forwards unknown attributes by `__getattr__` (a wrapper forwards the methods it declares)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from facet_probe_dev import layout

#: What the package calls a runner in a variable or attribute name (`runner`, `judge.runner`, `self._inner`, ...).
RUNNER_NAMES = re.compile(r"^_?(\w*runner|inner|adapter)$")


def probes(path: Path) -> list[str]:
    """'file:line hasattr(...)' for each hasattr/getattr whose object is named like a runner, and 'file:line
    Class.__getattr__' for each class with a `generate` and a `__getattr__`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
            target = node.args[0] if node.args else None
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
            if RUNNER_NAMES.match(name):
                found.append((node.lineno, f"{path.name}:{node.lineno} {ast.unparse(node)}"))
        elif isinstance(node, ast.ClassDef):
            methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
            if {"generate", "__getattr__"} <= methods:
                found.append((node.lineno, f"{path.name}:{node.lineno} {node.name}.__getattr__"))
    return [text for _, text in sorted(found)]


def test_no_module_probes_a_runner() -> None:
    assert [p for path in sorted(layout.PACKAGE.rglob("*.py")) for p in probes(path)] == []


def test_the_scan_sees_a_probe_and_a_forwarding_runner(tmp_path: Path) -> None:
    """The check itself, on the probes the package had: both kinds are found; an SDK object's attribute is not."""
    module = tmp_path / "probing.py"
    module.write_text('cost = runner.cost_summary() if hasattr(runner, "cost_summary") else None\n'
                      'legacy = getattr(judge.runner, "legacy_fingerprints", list)()\n'
                      'reason = getattr(reply.incomplete_details, "reason", None)\n'
                      "class Paid:\n"
                      "    def generate(self, requests): ...\n"
                      "    def __getattr__(self, attr): return getattr(self._inner, attr)\n")
    assert probes(module) == ["probing.py:1 hasattr(runner, 'cost_summary')",
                              "probing.py:2 getattr(judge.runner, 'legacy_fingerprints', list)",
                              "probing.py:4 Paid.__getattr__", "probing.py:6 getattr(self._inner, attr)"]
