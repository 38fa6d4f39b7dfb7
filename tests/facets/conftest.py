from __future__ import annotations

import pytest
from facet_test_helpers import facet_items


@pytest.fixture
def items():
    return facet_items()
