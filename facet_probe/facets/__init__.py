"""The ordering facets: one plug-in module each, over the shared layout of `facets.layout`.

`FACETS` maps each built-in facet's name to its class, read from the package's conf/facet/ configs
(`facets.registry`; `registry.on_search_path()` adds the facets of user folders and plug-in packages);
`MAIN_FACETS` lists the five main facets of the paper, in paper order. A facet's class is also an
attribute here under its class name (`facet_probe.facets.OptionOrder`).
"""

from __future__ import annotations

from facet_probe.facets.base import Facet, UnsupportedItem
from facet_probe.facets.registry import builtin, main_facets

FACETS: dict[str, type[Facet]] = builtin()
MAIN_FACETS: tuple[str, ...] = main_facets()
_BY_CLASS_NAME = {cls.__name__: cls for cls in FACETS.values()}


def __getattr__(name: str) -> type[Facet]:
    """A built-in facet class by its class name (PEP 562), so no import list is kept by hand."""
    try:
        return _BY_CLASS_NAME[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["FACETS", "MAIN_FACETS", "Facet", "UnsupportedItem", *_BY_CLASS_NAME]
