"""Shared fixtures of the upstream-loader tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network, an empty Hugging Face cache and a private item cache for each test."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("FACET_PROBE_CACHE", str(tmp_path / "fp-cache"))
    return tmp_path
