"""The package reads as the pipeline (docs/architecture.md): at most 10 modules at its root, no import cycle
between its stages, every import pointing down the stack of facet_probe_dev/layout.py, and the page's module
map equal to the code's."""

from __future__ import annotations

import ast
from pathlib import Path

from facet_probe_dev import layout


def test_every_import_points_down_the_stack() -> None:
    assert layout.upward_imports() == []


def test_no_import_cycle() -> None:
    """No module imports one that imports it back, in a function or not (attack/config.py and
    attack/objectives/base.py did, through a helper both needed)."""
    assert layout.import_cycles() == []


def test_at_most_ten_modules_at_the_root() -> None:
    root_modules = sorted(p.name for p in layout.PACKAGE.glob("*.py"))
    assert len(root_modules) <= 10, root_modules


def test_every_stage_is_on_the_stack_and_says_what_it_owns() -> None:
    """A new subpackage must be placed on the stack (else its imports go unchecked), and its __init__ docstring
    opens with a line or two saying what it owns."""
    stages = sorted(p.parent.name for p in layout.PACKAGE.glob("*/__init__.py") if p.parent.name not in layout.PLUMBING)
    assert [s for s in stages if layout.rank(s) == layout.TOP] == []
    for s in stages:
        doc = ast.get_docstring(ast.parse((layout.PACKAGE / s / "__init__.py").read_text()))
        summary = (doc or "").split("\n\n")[0]
        assert summary and summary.count("\n") < 2, f"facet_probe/{s}/__init__.py: say what it owns in 1-2 lines"


def test_the_architecture_page_shows_the_code_s_map() -> None:
    page = layout.DOC.read_text()
    assert layout.BEGIN in page, "docs/architecture.md lost its module map markers"
    assert page == layout.page_with_map(page), "docs/architecture.md's module map is stale: run make architecture"


def test_the_check_sees_an_upward_import_a_peer_and_a_cycle(tmp_path: Path) -> None:
    """The check itself: core importing the report (up), judge importing attack (a peer) and a cycle between
    two stages (one of its two imports points up) are found; an entry point importing anything is not."""
    pkg = tmp_path / "facet_probe"
    for stage in ("core", "report", "judge", "attack"):
        (pkg / stage).mkdir(parents=True)
    (pkg / "core" / "bad.py").write_text("from facet_probe.report import run\n")
    (pkg / "core" / "__main__.py").write_text("from facet_probe.report import run\n")
    (pkg / "report" / "ok.py").write_text("import facet_probe.core.bad\nfrom . import sibling\n")
    (pkg / "judge" / "peer.py").write_text("from facet_probe.attack import pgd\n")
    assert layout.upward_imports(pkg) == [
        "facet_probe/core/bad.py:1 imports facet_probe.report (core -> report)",
        "facet_probe/judge/peer.py:1 imports facet_probe.attack (judge -> attack)",
    ]


def test_the_check_sees_a_cycle_within_a_stage_and_through_a_function(tmp_path: Path) -> None:
    """A cycle inside one stage points neither up nor sideways: the cycle check finds it, an import made in a
    function included (a cycle put off to call time is still one); `from a import b` counts as importing a.b."""
    pkg = tmp_path / "facet_probe"
    (pkg / "attack" / "objectives").mkdir(parents=True)
    (pkg / "attack" / "__init__.py").write_text("")
    (pkg / "attack" / "objectives" / "__init__.py").write_text("")
    (pkg / "attack" / "config.py").write_text("def f():\n    from facet_probe.attack.objectives.base import g\n")
    (pkg / "attack" / "objectives" / "base.py").write_text("from facet_probe.attack import config\n")
    (pkg / "attack" / "pgd.py").write_text("from facet_probe.attack.config import f\n")
    assert layout.upward_imports(pkg) == []
    assert layout.import_cycles(pkg) == [
        ["facet_probe.attack.config", "facet_probe.attack.objectives.base", "facet_probe.attack.config"]]
