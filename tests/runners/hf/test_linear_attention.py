"""Issue 66 (4): the load says which path Qwen3.5's linear-attention (Gated-DeltaNet) layers take, fast kernels or
transformers' PyTorch fallback (on this CPU machine: PyTorch, and the line says why)."""

from __future__ import annotations

import logging

import pytest

from facet_probe.runners.hf import linear_attention
from facet_probe.runners.hf.linear_attention import KERNELS, paths_line

LINE = ("linear-attention layers: Qwen3_5GatedDeltaNet x1 on cpu: gated delta rule torch (flash-linear-attention not "
        "installed), causal conv1d torch (causal-conv1d not installed)")


def test_the_tiny_qwen35_load_logs_one_line_saying_its_layers_take_the_pytorch_path(make_runner, caplog):
    with caplog.at_level(logging.INFO, logger="facet_probe.runners.hf"):
        make_runner("qwen3_5", fresh=True).close()
    lines = [r for r in caplog.records if "linear-attention layers" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO  # on a CPU the PyTorch path is expected
    assert lines[0].getMessage().startswith(f"tiny_qwen3_5: {LINE} (the PyTorch path is correct but slow on a GPU: "
                                            "pip install 'facet_probe[gpu]', then pip install causal-conv1d "
                                            "--no-build-isolation")


def test_a_model_without_linear_attention_layers_logs_nothing(make_runner, caplog):
    runner = make_runner("llava")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="facet_probe.runners.hf"):
        assert linear_attention.log_linear_attention("l", runner.model, logging.getLogger("facet_probe.runners.hf")) \
            is None
    assert not caplog.records


def test_each_kernel_runs_where_its_package_imports_and_has_a_kernel_for_the_layers_device():
    both = {"fla": True, "causal_conv1d": True}
    line, slow = paths_line({"Qwen3_5GatedDeltaNet": {"cuda": 24}}, both)
    assert line == ("linear-attention layers: Qwen3_5GatedDeltaNet x24 on cuda: gated delta rule "
                    "flash-linear-attention, causal conv1d causal-conv1d") and not slow
    line, slow = paths_line({"Qwen3_5GatedDeltaNet": {"cuda": 24}}, {"fla": True, "causal_conv1d": False})
    assert "causal conv1d torch (causal-conv1d not installed)" in line and slow  # a GPU on the slow path: a warning
    line, slow = paths_line({"Qwen3_5GatedDeltaNet": {"cpu": 2}}, both)  # offloaded layers: no CPU kernels
    assert "gated delta rule torch (flash-linear-attention has no cpu kernel)" in line and not slow
    assert paths_line({}, both) is None


def test_the_devices_of_each_kernel_are_the_installed_transformers_own():
    hub_kernels = pytest.importorskip("transformers.integrations.hub_kernels")
    supported = getattr(hub_kernels, "_PACKAGE_SUPPORTED_DEVICES", None)
    if supported is None:
        pytest.skip("this transformers decides at import only (no per-device table)")
    for kernel in KERNELS:
        assert kernel.devices == tuple(supported[kernel.module]), kernel.module
