"""The facet registry: every `conf/facet/<name>.yaml` names its facet class by `_target_`, nothing else lists them.

`builtin()` reads the package's own `conf/facet/` (no Hydra app needed: `FACETS`, `MAIN_FACETS`);
`on_search_path()` asks Hydra for the group's options on the running app's search path, so a facet from
a user folder (`hydra.searchpath=[file://<dir>]`) or from an installed plug-in package is listed too.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.resources import files

import yaml

from facet_probe.facets.base import Facet

GROUP = "facet"


def facet_class(target: str, where: str) -> type[Facet]:
    """The class a facet config's `_target_` names (`module.Class`), checked to be a `Facet` (imported with
    importlib, not Hydra, so that `import facet_probe.facets` stays light)."""
    from facet_probe.core.errors import ConfigError  # only on a bad config: Hydra stays unimported

    module, _, attr = str(target or "").rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr, None) if module else None
    except ImportError as exc:
        raise ConfigError(f"{where}: _target_ {target!r} cannot be imported ({exc}); put its module on PYTHONPATH "
                          "or install its package") from None
    if not (isinstance(cls, type) and issubclass(cls, Facet)):
        raise ConfigError(f"{where}: _target_ {target!r} is not a facet class (a subclass of "
                          "facet_probe.facets.base.Facet)")
    return cls


def ordered(classes: dict[str, type[Facet]]) -> dict[str, type[Facet]]:
    """Facets in listing order: by `rank` (the paper's order), then by name."""
    return dict(sorted(classes.items(), key=lambda kv: (kv[1].rank, kv[0])))


@cache
def builtin() -> dict[str, type[Facet]]:
    """{name: class} of the facets the package ships (its `conf/facet/*.yaml`), in listing order."""
    folder = files("facet_probe.conf").joinpath(GROUP)
    configs = sorted((p for p in folder.iterdir() if p.name.endswith(".yaml") and not p.name.startswith("_")),
                     key=lambda p: p.name)
    return ordered({p.name.removesuffix(".yaml"): facet_class(yaml.safe_load(p.read_text())["_target_"],
                                                              f"conf/{GROUP}/{p.name}")
                    for p in configs})


@cache
def default_datasets() -> dict[str, tuple[str, ...]]:
    """{facet: the datasets its package config audits it on} (`datasets:`): for the main facets, the paper's."""
    folder = files("facet_probe.conf").joinpath(GROUP)
    return {name: tuple(yaml.safe_load(folder.joinpath(f"{name}.yaml").read_text()).get("datasets") or ())
            for name in builtin()}


def on_search_path() -> dict[str, type[Facet]]:
    """{name: class} of every facet config on the config search path now (the package's, the user's folders',
    installed plug-ins'), in listing order."""
    from facet_probe.config.loading import available, load_option

    return ordered({name: facet_class(load_option(GROUP, name)["_target_"], f"facet config {name}")
                    for name in available(GROUP)})


def lookup(name: str) -> type[Facet]:
    """The facet class named `name`: a built-in one, else one on the search path; an unknown name is a
    ConfigError (a user error: one line) listing the facets there are."""
    if name in builtin():
        return builtin()[name]
    from facet_probe.core.errors import ConfigError  # only past the built-in ones: Hydra stays unimported

    found = on_search_path()
    if name not in found:
        raise ConfigError(f"unknown facet {name!r}; known: {', '.join(found)} (a facet of your own: its config "
                          "in <dir>/facet/<name>.yaml, with hydra.searchpath=[file://<dir>])")
    return found[name]


def main_facets() -> tuple[str, ...]:
    """The five main facets of the paper, in paper order (the built-in facets with `main`)."""
    return tuple(name for name, cls in builtin().items() if cls.main)


__all__ = ["builtin", "facet_class", "lookup", "main_facets", "on_search_path"]
