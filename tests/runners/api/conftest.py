"""Fixtures for the API runner tests."""

from __future__ import annotations

import pytest
from api_test_helpers import KEYS, three_images

from facet_probe.core.items import ImageRef


@pytest.fixture
def api_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Distinctive fake keys in the environment (and no stray GEMINI_API_KEY)."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    for env, value in KEYS.items():
        monkeypatch.setenv(env, value)
    return KEYS


@pytest.fixture
def images() -> list[ImageRef]:
    return three_images()
