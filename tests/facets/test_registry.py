"""The facet registry: the configs in conf/facet/ are the only list of facets; every facet is a plug-in module."""

from __future__ import annotations

from pathlib import Path

import pytest

import facet_probe
from facet_probe.core.errors import ConfigError
from facet_probe.core.items import ComponentKind
from facet_probe.facets import FACETS, MAIN_FACETS
from facet_probe.facets.base import Facet
from facet_probe.facets.layout import KIND_LABELS
from facet_probe.facets.registry import builtin, lookup, on_search_path

PACKAGE = Path(facet_probe.__file__).parent
#: The modules that kept facet names by hand before the registry (the issue's list).
NAME_LISTS = ["facets/__init__.py", "facets/prompts.py", "facets/examples/__init__.py",
              "facets/examples/__main__.py", "facets/layout.py",
              "datasets/items_jsonl.py", "odi/simulate.py"]


def test_the_registry_is_the_package_configs_in_listing_order():
    stems = {p.stem for p in (PACKAGE / "conf" / "facet").glob("*.yaml")}
    assert set(FACETS) == stems == set(on_search_path())
    ranks = [(cls.rank, name) for name, cls in FACETS.items()]
    assert ranks == sorted(ranks) and list(on_search_path()) == list(FACETS)
    assert tuple(n for n, cls in FACETS.items() if cls.main) == MAIN_FACETS


@pytest.mark.parametrize("name", list(FACETS))
def test_each_facet_carries_its_own_contract(name):
    cls = FACETS[name]
    assert issubclass(cls, Facet) and cls.name == name == cls.__module__.rsplit(".", 1)[1]
    assert lookup(name) is cls and getattr(facet_probe.facets, cls.__name__) is cls
    labelled = {**KIND_LABELS, **cls.kind_labels}
    assert all(k in labelled for k in cls.kinds if k not in (ComponentKind.CHOICE, ComponentKind.DIALOG_TURN))
    assert cls().unsupported_reason(cls.example()) is None and cls.system.strip()


@pytest.mark.parametrize("module", NAME_LISTS)
def test_no_module_keeps_a_list_of_facet_names(module):
    text = (PACKAGE / module).read_text()
    assert not [n for n in FACETS if f'"{n}"' in text or f"'{n}'" in text]


def test_an_unknown_facet_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown facet 'no_such_order'; known: option_order, evidence"):
        lookup("no_such_order")
    assert builtin() is builtin()  # read once
