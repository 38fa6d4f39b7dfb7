"""Explicit GPU placement of an HF model: the whole model on one GPU where it fits (the visible GPU with the
most free memory, so jobs sharing a node spread one model per GPU), sharded over the fewest GPUs where it
does not, instead of `device_map="auto"` spreading every model over every visible GPU.

The decision (`decide`) is a pure function of the weights' size and each GPU's free memory, so it is tested
on a CPU machine; `place(runner, gpus)` sizes the model and returns the decision with what `from_pretrained`
takes: {"": "cuda:i"} on one GPU, or an explicit module -> GPU map (transformers' `infer_auto_device_map` on an
empty-weights copy, limited to the chosen GPUs); `device_map_for(runner)` does it for the visible GPUs. The
decision is kept on the runner (`runner.placement`) for its provenance. `Policy.SPREAD` restores the earlier
behaviour (`device_map="auto"` over every visible GPU).

Sizes: unquantised, the parameter count of the safetensors headers x bytes per parameter. NF4 is sized the
way `from_pretrained` sizes it for its own device map: an empty copy whose linear layers transformers'
bitsandbytes quantizer has replaced (4-bit weights at 0.5 bytes, the rest in the compute dtype), grossed up by
the room the quantizer keeps for its buffers (`adjust_max_memory`); the map is made from that same copy, so
the decision and the map agree (an NF4 model too big for one GPU is sharded, not refused).
"""

from __future__ import annotations

import json
import logging
import math
import struct
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from facet_probe.runners.base import RunnerError

log = logging.getLogger(__name__)

GIB = 1024**3
#: Bytes per parameter as loaded (nf4: a rough figure for 4 bits plus quantisation constants and the layers kept
#: in 16 bits; `place` measures an NF4 model instead, `loaded_bytes`).
BYTES_PER_PARAM = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "nf4": 0.6}
_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                      "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


class Policy(StrEnum):
    ONE_PER_GPU = "one_per_gpu"  # one GPU where the model fits, else the fewest GPUs that hold it
    SPREAD = "spread"  # device_map="auto": every visible GPU (the behaviour before explicit placement)


@dataclass(frozen=True)
class PlacementConfig:
    policy: Policy = Policy.ONE_PER_GPU
    headroom: float = 1.25  # weights x headroom must fit: activations, KV cache and the batch need room too


def placement_config(model: str, settings: dict | None) -> PlacementConfig:
    """`model.placement` ({policy, headroom}) as a PlacementConfig, or one message naming what is valid."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - {"policy", "headroom"})
    try:
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)} (it takes policy and headroom)")
        config = PlacementConfig(policy=Policy(settings.get("policy", Policy.ONE_PER_GPU)),
                                 headroom=float(settings.get("headroom", 1.25)))
        if config.headroom < 1.0:
            raise ValueError(f"headroom {config.headroom} < 1: the weights alone would not fit")
    except ValueError as exc:
        raise ValueError(f"{model}: model.placement: {exc}; policy is one of "
                         f"{', '.join(p.value for p in Policy)}") from None
    return config


@dataclass(frozen=True)
class Gpu:
    index: int
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Placement:
    """Where a model goes: the GPUs it uses, whether it is sharded, and why."""

    gpus: tuple[int, ...]
    sharded: bool
    need_gib: float
    free_gib: tuple[float, ...]
    policy: str
    reason: str

    def record(self) -> dict[str, Any]:
        return asdict(self)


def decide(weights_bytes: int, gpus: list[Gpu], config: PlacementConfig = PlacementConfig(),
           quantization: str = "none") -> Placement:
    """Choose the GPUs for a model of `weights_bytes` (as loaded, quantised as `quantization` says) among `gpus`."""
    if not gpus:
        raise RunnerError("no CUDA device is visible; use device=cpu")
    need = weights_bytes * config.headroom
    free = tuple(round(g.free_bytes / GIB, 2) for g in gpus)
    if config.policy is Policy.SPREAD:
        return Placement(tuple(g.index for g in gpus), len(gpus) > 1, round(need / GIB, 2), free,
                         config.policy.value, "device_map=auto over every visible GPU (policy spread)")
    by_free = sorted(gpus, key=lambda g: (-g.free_bytes, g.index))
    if by_free[0].free_bytes >= need:
        g = by_free[0]
        return Placement((g.index,), False, round(need / GIB, 2), free, config.policy.value,
                         f"fits on one GPU: needs {need / GIB:.1f} GiB, cuda:{g.index} has "
                         f"{g.free_bytes / GIB:.1f} GiB free (the most)")
    chosen, total = [], 0
    for g in by_free:
        chosen.append(g)
        total += g.free_bytes
        if total >= need:
            ids = tuple(sorted(c.index for c in chosen))
            return Placement(ids, True, round(need / GIB, 2), free, config.policy.value,
                             f"needs {need / GIB:.1f} GiB, more than any one GPU has free "
                             f"({by_free[0].free_bytes / GIB:.1f} GiB): sharded over {len(ids)} GPUs")
    quantize = "" if quantization == "nf4" else "quantization=nf4, "
    raise RunnerError(f"the model needs {need / GIB:.1f} GiB (weights x {config.headroom} headroom) but the "
                      f"visible GPUs have {total / GIB:.1f} GiB free together; use {quantize}more GPUs "
                      "(a larger hydra/launcher=slurm_* size) or a smaller model")


def weights_bytes(folder: Path, dtype: str, quantization: str = "off") -> int:
    """The weights' size as loaded: parameter count from the safetensors headers x bytes per parameter."""
    params, stored = 0, 0
    for file in sorted(Path(folder).glob("*.safetensors")):
        with file.open("rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
        for name, spec in header.items():
            if name != "__metadata__":
                n = math.prod(spec["shape"])
                params += n
                stored += n * _SAFETENSORS_BYTES.get(spec["dtype"], 2)
    if quantization == "nf4":
        return int(params * BYTES_PER_PARAM["nf4"])
    if dtype in BYTES_PER_PARAM:
        return int(params * BYTES_PER_PARAM[dtype])
    return stored  # dtype auto: as stored


def visible_gpus() -> list[Gpu]:
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        out.append(Gpu(i, total, free))
    return out


@dataclass
class EmptyModel:
    """The runner's model on the meta device as `from_pretrained` builds it (dtype; NF4 layers swapped in by
    transformers' quantizer, `quantizer` None when unquantised): what sizes and maps are computed from."""

    model: Any
    quantizer: Any = None


def empty_model(runner: Any, torch_dtype: Any) -> EmptyModel:
    """The runner's model with empty (meta) weights in `torch_dtype` (None: the checkpoint's), quantised as the
    runner loads it."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig

    hf_config = AutoConfig.from_pretrained(runner.folder, trust_remote_code=runner.trust_remote_code)
    dtype = torch_dtype or getattr(hf_config, "dtype", None)
    loader = runner._model_loader()
    quantizer = None
    if runner.quantization_used == "nf4":
        from transformers.quantizers import AutoHfQuantizer

        from facet_probe.runners.hf.fast_paths import nf4_config

        quantizer = AutoHfQuantizer.from_config(nf4_config(), pre_quantized=False)
    with init_empty_weights():
        if hasattr(loader, "from_config"):  # an Auto class (remote code goes through it)
            model = loader.from_config(hf_config, trust_remote_code=runner.trust_remote_code, dtype=dtype)
        else:  # a model class (IDEFICS, BLIP-2): the same constructor the Auto classes call
            model = loader._from_config(hf_config, dtype=dtype)
        if quantizer is not None:  # what from_pretrained does before the weights load: no weights touched
            quantizer.preprocess_model(model=model, dtype=dtype, device_map=None, checkpoint_files=None)
    return EmptyModel(model, quantizer)


def loaded_bytes(empty: EmptyModel) -> int:
    """The memory the model takes once loaded, counted as transformers counts it for its device map (4-bit
    weights at their quantised size), plus the room its quantizer keeps for buffers (`adjust_max_memory`)."""
    from transformers.integrations.accelerate import compute_module_sizes

    sizes, _ = compute_module_sizes(empty.model, empty.quantizer)
    room = empty.quantizer.adjust_max_memory({"gpu": 1.0})["gpu"] if empty.quantizer is not None else 1.0
    return math.ceil(sizes[""] / room)


def shard_map(runner: Any, placement: Placement, gpus: list[Gpu], torch_dtype: Any,
              config: PlacementConfig = PlacementConfig(), empty: EmptyModel | None = None) -> dict[str, Any]:
    """An explicit module -> GPU map over the chosen GPUs (no layer split across two), sized for the model as it
    loads (NF4 layers at their 4-bit size, with the quantizer's own margin)."""
    from transformers.integrations.accelerate import infer_auto_device_map

    empty = empty or empty_model(runner, torch_dtype)
    free = {g.index: g.free_bytes for g in gpus}
    budget: dict[Any, Any] = {i: int(free[i] / config.headroom) for i in placement.gpus}
    if empty.quantizer is not None:
        budget = {i: int(b) for i, b in empty.quantizer.adjust_max_memory(budget).items()}
    device_map = infer_auto_device_map(empty.model, max_memory=budget, hf_quantizer=empty.quantizer,
                                       no_split_module_classes=set(empty.model._no_split_modules or ()))
    off = sorted({str(d) for d in device_map.values() if d not in placement.gpus})
    if off:
        fix = ("more GPUs (a larger hydra/launcher=slurm_* size), a lower model.placement.headroom or a smaller "
               "model" if runner.quantization_used == "nf4" else "quantization=nf4 or more GPUs")
        raise RunnerError(f"{runner.name}: the chosen GPUs {placement.gpus} cannot hold every layer (whole layers "
                          f"per GPU; the rest would go to {', '.join(off)}); use {fix}")
    return device_map


def place(runner: Any, gpus: list[Gpu], config: PlacementConfig = PlacementConfig()) -> tuple[Placement, Any]:
    """The placement of the runner's model on `gpus` and `from_pretrained`'s device_map for it."""
    import torch

    dtype = getattr(torch, runner.dtype) if runner.dtype in BYTES_PER_PARAM else None
    empty = empty_model(runner, dtype) if runner.quantization_used == "nf4" else None
    size = loaded_bytes(empty) if empty is not None else weights_bytes(runner.folder, runner.dtype)
    placement = decide(size, gpus, config, runner.quantization_used)
    if config.policy is Policy.SPREAD:
        return placement, "auto"
    if not placement.sharded:
        return placement, {"": f"cuda:{placement.gpus[0]}"}
    return placement, shard_map(runner, placement, gpus, dtype, config, empty)


def device_map_for(runner: Any, config: PlacementConfig) -> Any:
    """`from_pretrained`'s device_map for an HF runner on CUDA under its `config` (`model.placement`), recording
    the decision as `runner.placement`. Before the weights' folder is known (pre-flight) it only checks that a
    GPU is visible."""
    gpus = visible_gpus()
    if runner.folder is None:
        decide(0, gpus, config)
        return "auto"
    placement, device_map = place(runner, gpus, config)
    runner.placement = placement.record()
    log.info("%s: %s", runner.name, placement.reason)
    return device_map
