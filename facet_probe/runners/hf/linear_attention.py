"""Which path the linear-attention (Gated-DeltaNet) layers of a loaded model take: fast kernels or PyTorch.

Qwen3.5's hybrid text model has Gated-DeltaNet layers. transformers runs them with two kernel packages when it can,
else with its own PyTorch functions (correct, much slower on a GPU). How transformers 5.25 decides
(`integrations/hub_kernels.use_kernel_func_from_hub_with_fallback`, applied to `torch_chunk_gated_delta_rule`,
`causal_conv1d_fn`, ...): when the modeling module is imported it imports the kernel's package (`fla` for the
gated delta rule, `causal_conv1d` for the short convolution) and keeps the PyTorch function if that fails; at each
call, inputs on a device the package has no kernel for (`_PACKAGE_SUPPORTED_DEVICES`) take the PyTorch path. Older
releases chose once at import (`is_flash_linear_attention_available` / `is_causal_conv1d_available`, both false
without CUDA). Either way: fast where the package imports and the layer sits on a device it supports.
`log_linear_attention` says it in one line when the model loads (no line for a model without such layers).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from facet_probe.core.extras import pip_install, pip_install_against_torch


@dataclass(frozen=True)
class Kernel:
    """One kernel package of a Gated-DeltaNet layer: what it computes, its import and pip names, its devices."""

    part: str
    module: str
    distribution: str
    devices: tuple[str, ...]


#: the kernel packages transformers uses for these layers, with the device types each runs on (transformers 5.25,
#: `hub_kernels._PACKAGE_SUPPORTED_DEVICES`)
KERNELS = (Kernel("gated delta rule", "fla", "flash-linear-attention", ("cuda", "xpu", "mlu", "npu")),
           Kernel("causal conv1d", "causal_conv1d", "causal-conv1d", ("cuda",)))
#: a linear-attention layer's class name ends with this (Qwen3.5, Qwen3.5-MoE and Qwen3-Next's layers)
LAYER_SUFFIX = "GatedDeltaNet"
#: how to install the kernels: flash-linear-attention is a wheel (the `gpu` extra), causal-conv1d builds against torch
INSTALL_HINT = f"{pip_install('gpu')}, then {pip_install_against_torch('causal-conv1d')} (a CUDA machine)"


def importable(module: str) -> bool:
    """Whether `module` imports here, as transformers tries it (an installed package whose import fails counts as
    absent: transformers then keeps the PyTorch path too)."""
    try:
        importlib.import_module(module)
    except Exception:
        return False
    return True


def kernel_path(kernel: Kernel, available: bool, device: str) -> str:
    """The path `kernel`'s part takes for a layer on `device`: the package's name, or `torch (<why>)`."""
    if not available:
        return f"torch ({kernel.distribution} not installed)"
    if device not in kernel.devices:
        return f"torch ({kernel.distribution} has no {device} kernel)"
    return kernel.distribution


def layer_families(model) -> dict[str, dict[str, int]]:
    """Linear-attention layer class -> {device type: layers of it there}, read from a loaded model."""
    out: dict[str, dict[str, int]] = {}
    for module in model.modules():
        name = type(module).__name__
        if name.endswith(LAYER_SUFFIX):
            weight = next(module.parameters(), None)
            device = weight.device.type if weight is not None else "cpu"
            counts = out.setdefault(name, {})
            counts[device] = counts.get(device, 0) + 1
    return out


def paths_line(families: Mapping[str, Mapping[str, int]], available: Mapping[str, bool]) -> tuple[str, bool] | None:
    """One line naming each layer family's path per kernel and device, and whether any layer on a GPU takes the
    PyTorch path (worth a warning); None for a model without linear-attention layers."""
    if not families:
        return None
    parts, slow_on_gpu = [], False
    for family, devices in sorted(families.items()):
        for device, layers in sorted(devices.items()):
            paths = [f"{k.part} {kernel_path(k, available[k.module], device)}" for k in KERNELS]
            slow_on_gpu |= device != "cpu" and any(" torch (" in p for p in paths)
            parts.append(f"{family} x{layers} on {device}: {', '.join(paths)}")
    line = "linear-attention layers: " + "; ".join(parts)
    if any(" torch (" in p for p in parts):
        line += f" (the PyTorch path is correct but slow on a GPU: {INSTALL_HINT})"
    return line, slow_on_gpu


def log_linear_attention(name: str, model, log: logging.Logger,
                         available: Callable[[str], bool] = importable) -> str | None:
    """Log which path each linear-attention layer family of `model` takes (one line: INFO, WARNING where a layer on
    a GPU runs the PyTorch path); the line, or None for a model without such layers."""
    families = layer_families(model)
    said = paths_line(families, {k.module: available(k.module) for k in KERNELS}) if families else None
    if said is None:
        return None
    line, slow_on_gpu = said
    log.log(logging.WARNING if slow_on_gpu else logging.INFO, "%s: %s", name, line)
    return line
