"""Attack tests: loaded runners on the tiny models of `tiny_root` (tests/conftest.py), one fitted to answer."""

from __future__ import annotations

import pytest

from facet_probe.runners.hf.llava import LlavaRunner
from facet_probe.runners.hf.qwen import QwenRunner
from facet_probe_dev.testing.tiny_models import tiny_model_path
from facet_probe_dev.testing.trained_tiny import train_tiny_llava


def _runner(cls, path, **kw):
    runner = cls(name="tiny", model_id="tiny/x", local_path=str(path), dtype="float32",
                 generation={"max_new_tokens": 16}, **kw)
    runner.check_ready()
    return runner


@pytest.fixture(scope="session")
def llava(tiny_root):
    """The tiny random LLaVA (byte-level BPE tokenizer with BOS)."""
    return _runner(LlavaRunner, tiny_model_path("llava", tiny_root))


@pytest.fixture(scope="session")
def qwen(tiny_root):
    """The tiny random Qwen3.5 (its own tokenizer, patch-flattened pixels), thinking off."""
    return _runner(QwenRunner, tiny_model_path("qwen3_5", tiny_root), thinking=False)


@pytest.fixture(scope="session")
def answering_path(tiny_root):
    """A tiny LLaVA whose greedy replies to the first 4 synthetic_visual_mcq items are correct."""
    return train_tiny_llava(tiny_root, n=4)


@pytest.fixture(scope="session")
def answering(answering_path):
    return _runner(LlavaRunner, answering_path)
