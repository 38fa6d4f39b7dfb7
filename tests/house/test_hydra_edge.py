"""Hydra's runtime is the command line's edge: only the apps' shells (`__main__.py`) and their error boundary
(`app/boundary.py`) read `HydraConfig`; everything else is passed what it needs (the run folder, the choices), so
the apps run from Python with no Hydra runtime, and the Python API uses no private Hydra module."""

from __future__ import annotations

import ast

from facet_probe_dev import layout

EDGE = ("app/boundary.py",)


def names_in(path) -> set[str]:
    """Every name, attribute and imported module the file spells."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {node.module or ""} | {a.name for a in node.names}
    return found


def test_only_the_command_line_edge_reads_hydras_runtime():
    """The audit job, the Python API, the cost ledger and the config look-ups read `HydraConfig` (the run folder,
    the choices, the user's config folders) wherever they were called from."""
    readers = sorted(str(p.relative_to(layout.PACKAGE)) for p in layout.PACKAGE.rglob("*.py")
                     if "HydraConfig" in names_in(p) and p.name != "__main__.py"
                     and str(p.relative_to(layout.PACKAGE)) not in EDGE)
    assert readers == []


def test_the_python_api_imports_no_private_hydra_module():
    """`api.run` ran its apps through `hydra._internal.callbacks.Callbacks`, which Hydra may change at will."""
    for module in ("api.py", "app/job.py", "app/audit_job.py"):
        private = sorted(n for n in names_in(layout.PACKAGE / module) if n.startswith("hydra._"))
        assert private == [], module
