"""Loaded runners on the tiny random models of every family (`tiny_root`, tests/conftest.py), reused by tests."""

from __future__ import annotations

import pytest
from hf_test_helpers import ADAPTERS

from facet_probe_dev.testing.tiny_models import tiny_model_path


@pytest.fixture(scope="session")
def make_runner(tiny_root):
    """make_runner(family, fresh=False, **overrides): a loaded runner on the tiny model (cached unless fresh)."""
    cache: dict = {}

    def make(family: str, fresh: bool = False, **overrides):
        cls, family_keys = ADAPTERS[family]
        kwargs = {"name": f"tiny_{family}", "model_id": f"tiny/{family}",
                  "local_path": str(tiny_model_path(family, tiny_root)), "dtype": "float32",
                  "generation": {"max_new_tokens": 6}, "batch_size": 4, **family_keys, **overrides}
        key = (family, repr(sorted(overrides.items())))
        if fresh or key not in cache:
            runner = cls(**kwargs)
            runner.check_ready()
            if fresh:
                return runner
            cache[key] = runner
        return cache[key]

    return make
