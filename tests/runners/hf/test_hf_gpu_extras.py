"""Issue 66 (1): no extra carries a CUDA kernel whose build imports torch (under pip's build isolation that build
fails: `No module named 'torch'`), and what is said where flash-attn is absent is the command that works."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from facet_probe.core.extras import BUILT_AGAINST_TORCH
from facet_probe.runners.hf import fast_paths

ROOT = Path(__file__).resolve().parents[3]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
WORKS = "pip install flash-attn --no-build-isolation"


def test_no_extra_carries_a_kernel_built_against_torch_and_the_gpu_extra_brings_the_wheel_kernels():
    for extra, requirements in EXTRAS.items():
        names = {Requirement(r).name for r in requirements}
        assert not names & set(BUILT_AGAINST_TORCH), extra
    assert {Requirement(r).name for r in EXTRAS["gpu"]} == {"flash-linear-attention"}
    assert "flash" not in EXTRAS  # `pip install -e ".[flash]"` was the command that failed


def test_without_flash_attn_on_a_cuda_machine_the_message_gives_the_command_that_works(monkeypatch):
    import transformers.utils

    monkeypatch.setattr(fast_paths.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: False)
    ok, reason = fast_paths.flash_attention_status()
    assert not ok and reason == f"the flash-attn package is not installed (after torch: {WORKS})"


def test_the_docs_give_the_same_commands():
    for doc in ("README.md", "docs/hf_models.md"):
        text = (ROOT / doc).read_text()
        assert "pip install flash-attn causal-conv1d --no-build-isolation" in text, doc
        assert '".[flash]"' not in text and "facet_probe[flash]" not in text, doc
