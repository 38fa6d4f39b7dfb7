"""Old import paths of the modules that moved when the package was laid out by pipeline stage (0.2): each still
imports, for one release, as the module it became, with a DeprecationWarning naming the new path.

Plug-ins, notebooks and saved configs (`_target_: facet_probe.prompt_mitigation...`) written against 0.1 keep
working; `python -W error::DeprecationWarning` finds what to update."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import CodeType, ModuleType
from typing import Any

#: old module -> the module that holds its names now (0.1 -> 0.2)
MOVED = {
    "facet_probe.items": "facet_probe.core.items",
    "facet_probe.prompts": "facet_probe.core.prompts",
    "facet_probe.permutations": "facet_probe.core.permutations",
    "facet_probe.trials": "facet_probe.core.trials",
    "facet_probe.redact": "facet_probe.core.redact",
    "facet_probe.atomic": "facet_probe.store.atomic",
    "facet_probe.locking": "facet_probe.store.locking",
    "facet_probe.jsonl": "facet_probe.store.jsonl",
    "facet_probe.store": "facet_probe.store.trial_store",
    "facet_probe.trial_io": "facet_probe.store.reading",
    "facet_probe.run_status": "facet_probe.store.run_status",
    "facet_probe.config": "facet_probe.config.schema",
    "facet_probe.config_loading": "facet_probe.config.loading",
    "facet_probe.run_identity": "facet_probe.config.run_identity",
    "facet_probe.parsing": "facet_probe.scoring.parsing",
    "facet_probe.scoring": "facet_probe.scoring.score",
    "facet_probe.calibration": "facet_probe.scoring.stability",
    "facet_probe.rescore": "facet_probe.scoring.rescore",
    "facet_probe.run_trials": "facet_probe.scoring.run_trials",
    "facet_probe.cost": "facet_probe.runners.cost",
    "facet_probe.audit": "facet_probe.audit.plan",
    "facet_probe.manifest": "facet_probe.audit.manifest",
    "facet_probe.prompt_mitigation": "facet_probe.audit.mitigation",
    "facet_probe.progress": "facet_probe.audit.progress",
    "facet_probe.metrics": "facet_probe.metrics.flips",
    "facet_probe.control": "facet_probe.metrics.same_order",
    "facet_probe.decoder_noise": "facet_probe.decoder.noise",
    "facet_probe.decoder": "facet_probe.decoder.__main__",
    "facet_probe.cli": "facet_probe.app.boundary",
    "facet_probe.sweep": "facet_probe.app.sweep",
    "facet_probe.tracking": "facet_probe.app.tracking",
    "facet_probe.explore.build": "facet_probe.report.explorer.build",
    "facet_probe.explore.data": "facet_probe.report.explorer.data",
    "facet_probe.explore.page": "facet_probe.report.explorer.page",
    "facet_probe.explore.seen": "facet_probe.report.explorer.seen",
    "facet_probe.explore.attack": "facet_probe.report.explorer.attack",
    "facet_probe.paper.table1": "facet_probe.report.table1",
}


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes in the next release)",
                  DeprecationWarning, stacklevel=3)


class _Alias(importlib.abc.Loader):
    """Loads an old path as the very module object it moved to (one module, one set of classes)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(spec.name, self.new)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module it became has run already."""

    def get_code(self, fullname: str) -> CodeType | None:
        """`python -m <old path>` runs the new module's code."""
        spec = importlib.util.find_spec(self.new)
        loader = spec.loader if spec is not None else None
        return loader.get_code(self.new) if isinstance(loader, importlib.abc.InspectLoader) else None


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths that no file answers any more (an old module whose name is now a package is that
    package, which forwards the old module's names itself: `forward_old_names`)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None or importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on `sys.meta_path`, once."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


def forward_old_names(package: str, *homes: str) -> Callable[[str], Any]:
    """A package `__getattr__` for an old module that is a package now (`facet_probe.store` was the trial store):
    a name it no longer has is looked up in `homes` (default: where `MOVED` says the old module went)."""
    homes = homes or (MOVED[package],)

    def __getattr__(name: str) -> Any:
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is None:  # not a submodule
            for home in homes:
                module = importlib.import_module(home)
                if hasattr(module, name):
                    _warn(f"{package}.{name}", f"{home}.{name}")
                    return getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
