"""Attack tests: tiny models built (and one fitted to answer) offline once per session, one thread."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

from facet_probe.runners.hf.llava import LlavaRunner  # noqa: E402
from facet_probe.runners.hf.qwen import QwenRunner  # noqa: E402
from facet_probe_dev.testing.tiny_models import tiny_model_path  # noqa: E402
from facet_probe_dev.testing.trained_tiny import train_tiny_llava  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.mktemp("attack_tiny_models")


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
