"""Code written against the 0.1 layout keeps running for a release: every moved module imports under its old
path as the very module it became (one set of classes), with a DeprecationWarning naming the new path; an old
module whose name is a package now forwards its names; and the plug-ins of tests/plugins/, written against
0.1's names (`facet_probe.items`), still load through Hydra."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

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


def test_old_names_pass_unwarned_nowhere_in_the_package() -> None:
    """The package itself imports only the new paths: with old-path warnings as errors, importing every
    stage and running an app's import chain raises nothing."""
    code = ("import warnings; warnings.filterwarnings('error', message='.* moved to ', category=DeprecationWarning)\n"
            "import pkgutil, importlib, facet_probe\n"
            "for m in pkgutil.walk_packages(facet_probe.__path__, 'facet_probe.'):\n"
            "    if '.conf' not in m.name and '.assets' not in m.name: importlib.import_module(m.name)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
