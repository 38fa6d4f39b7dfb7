"""Code written against the 0.1 layout keeps running for a release: every moved module imports under its old
path as the very module it became (one set of classes), with a DeprecationWarning naming the new path; an old
module whose name is a package now forwards its names; and the plug-ins of tests/plugins/, written against
0.1's names (`facet_probe.items`), still load through Hydra."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import facet_probe
from facet_probe._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_as_the_module_it_became(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if sys.modules.get(old) is new:  # an earlier import left the alias: import it afresh
            del sys.modules[old]
        module = importlib.import_module(old)
        named = getattr(module, "__name__", "")
    package_now = module is not new
    if package_now:  # facet_probe.store was the trial store; it is the store package now and forwards the names
        public = [n for n in vars(new) if not n.startswith("_") and getattr(new, n, None) is not None
                  and getattr(getattr(new, n), "__module__", None) == new.__name__]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert getattr(module, public[0]) is getattr(new, public[0])
    else:
        assert named == new.__name__
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old].rsplit(".__main__", 1)[0] in str(w.message)
               for w in seen), [str(w.message) for w in seen]


def test_the_plugins_under_test_are_written_against_01_names() -> None:
    """tests/plugins/ runs these plug-ins through the audit, the examples tool and an installed package; they keep
    0.1's import paths, so those runs are the proof that a plug-in written before the move runs after it."""
    from pathlib import Path

    plugins = Path(__file__).parents[1] / "plugins"
    for rel in ("toy_facet/clue_order.py", "toy_package/fp_toy_plugin/hint_order.py",
                "toy_package/fp_toy_plugin/hint_set.py"):
        assert "from facet_probe.items import" in (plugins / rel).read_text(), rel


@pytest.mark.slow
def old_path_uses(package: Path) -> list[str]:
    """Where the package itself names a 0.1 path: an old module in an import, a string or a config `_target_`,
    or an old module's name taken from the package it is now (`from facet_probe.store import TrialStore`)."""
    aliased = [old for old in MOVED if not (package / old.removeprefix("facet_probe.").replace(".", "/")).is_dir()]
    named = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, aliased)) + r")(?![\w])")
    found = []
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.yaml")]):
        if path.name == "_moved.py":
            continue
        text = path.read_text()
        found += [f"{path.relative_to(package.parent)}: {m.group(1)}" for m in named.finditer(text)
                  if text[max(0, m.start() - 3):m.start()] != "-m "]
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ImportFrom) and node.module in MOVED and not node.level:
                    home = package / node.module.removeprefix("facet_probe.").replace(".", "/")
                    found += [] if not home.is_dir() else [f"{path.relative_to(package.parent)}:{node.lineno}: {node.module}.{a.name}"
                              for a in node.names if not (home / f"{a.name}.py").exists()
                              and not (home / a.name).is_dir()]
    return found


def test_the_package_names_no_old_path() -> None:
    """The package itself uses only the new paths (in imports, strings and configs), so no user sees a
    DeprecationWarning that the package caused."""
    package = Path(facet_probe.__file__).parent
    assert old_path_uses(package) == []


def test_the_old_path_check_sees_an_old_import(tmp_path: Path) -> None:
    pkg = tmp_path / "facet_probe"
    (pkg / "store").mkdir(parents=True)
    (pkg / "store" / "reading.py").write_text("")
    (pkg / "a.py").write_text("from facet_probe.items import Item\nfrom facet_probe.store import TrialStore\n"
                              "from facet_probe.store import reading\n")
    (pkg / "b.yaml").write_text("_target_: facet_probe.prompt_mitigation.Instruction\n")
    assert old_path_uses(pkg) == ["facet_probe/a.py: facet_probe.items", "facet_probe/a.py:2: facet_probe.store.TrialStore",
                                  "facet_probe/b.yaml: facet_probe.prompt_mitigation"]
