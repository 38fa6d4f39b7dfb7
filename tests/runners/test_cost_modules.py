"""`runners/cost.py` became a package of one-concept modules (prices, tokens, estimates, ledger, paid, spend): a
name imported from the single module it was still resolves, to the very object it is now, with a warning
naming its new home."""

from __future__ import annotations

import pytest

from facet_probe.runners import cost
from facet_probe.runners.cost import ledger, paid, prices, spend


@pytest.mark.parametrize(("name", "home"), [("CostLedger", ledger), ("PaidRunner", paid), ("paid_model", paid),
                                            ("load_price_table", prices), ("spend_line", spend)])
def test_a_name_of_the_single_cost_module_still_imports(name: str, home) -> None:
    with pytest.warns(DeprecationWarning, match=f"{home.__name__}.{name}"):
        assert getattr(cost, name) is getattr(home, name)


def test_a_name_it_never_had_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        cost.no_such_name  # noqa: B018
