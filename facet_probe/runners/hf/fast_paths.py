"""Fast-path decisions of the HF runners: attention implementation, NF4 quantisation, library versions.

Pure functions of what is installed (and a CUDA device), so the choices and their messages are testable
on a CPU machine: `auto` falls back with one note, `require` fails with one `RunnerError` naming the fix.
"""

from __future__ import annotations

import importlib.metadata
import platform

import torch

from facet_probe.core.extras import installed, pip_install, pip_install_against_torch
from facet_probe.runners.base import RunnerError

ATTENTION_NAMES = ("flash_attention_2", "sdpa", "eager")


def flash_attention_status() -> tuple[bool, str]:
    """Whether FlashAttention-2 can run here, and why not."""
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    from transformers.utils import is_flash_attn_2_available

    if not is_flash_attn_2_available():
        return False, f"the flash-attn package is not installed (after torch: {pip_install_against_torch('flash-attn')})"
    return True, "flash-attn " + _version("flash_attn")


def resolve_attention(mode: str, *, flash_ok: bool, flash_reason: str) -> tuple[list[str], str | None]:
    """Attention implementations to try in order for `mode`, and the note to log (None: nothing to say).

    `auto`: flash_attention_2 when usable, else sdpa, else eager; `off`: eager (no fused kernel);
    `require`: flash_attention_2 or a `RunnerError`; an implementation name: exactly that one.
    """
    if mode in ATTENTION_NAMES:
        if mode == "flash_attention_2" and not flash_ok:
            raise RunnerError(f"attn_implementation=flash_attention_2 cannot run: {flash_reason}. "
                              "Use model.attn_implementation=auto to fall back to sdpa.")
        return [mode], None
    if mode in ("off", False):  # YAML 1.1 reads a bare `off` as False
        return ["eager"], None
    if mode == "require":
        if not flash_ok:
            raise RunnerError(f"attn_implementation=require needs FlashAttention-2, which cannot run: "
                              f"{flash_reason}. Use model.attn_implementation=auto to fall back to sdpa.")
        return ["flash_attention_2"], None
    if mode == "auto":
        if flash_ok:
            return ["flash_attention_2", "sdpa", "eager"], None
        return ["sdpa", "eager"], f"FlashAttention-2 not used ({flash_reason}); using sdpa"
    raise RunnerError(f"attn_implementation must be auto, off, require or one of {ATTENTION_NAMES}; got {mode!r}")


def quantization_status() -> tuple[bool, str]:
    """Whether bitsandbytes 4-bit loading can run here, and why not (the [quant] extra installs bitsandbytes)."""
    if not installed("bitsandbytes"):
        return False, f"bitsandbytes is not installed ({pip_install('quant')})"
    if not installed("accelerate"):  # a dependency of facet_probe itself: a broken install
        return False, "accelerate is not installed (pip install accelerate)"
    return True, "bitsandbytes " + _version("bitsandbytes")


def resolve_quantization(mode: str, *, bnb_ok: bool, bnb_reason: str) -> tuple[str, str | None]:
    """`nf4` or `none` for the configured mode, and the note to log.

    `auto`: NF4 when bitsandbytes (and accelerate) are installed, else unquantised with a warning;
    `off`/`none`: unquantised; `require`/`nf4`: NF4 or a `RunnerError`.
    """
    if mode in ("off", "none", None, False):  # YAML 1.1 reads a bare `off` as False
        return "none", None
    if mode in ("require", "nf4"):
        if not bnb_ok:
            raise RunnerError(f"quantization={mode} needs bitsandbytes 4-bit: {bnb_reason}. "
                              "Set model.quantization=off to load unquantised.")
        return "nf4", None
    if mode == "auto":
        if bnb_ok:
            return "nf4", None
        return "none", f"NF4 quantisation not used: {bnb_reason}; loading unquantised"
    raise RunnerError(f"quantization must be auto, off or require; got {mode!r}")


def nf4_config():
    """bitsandbytes NF4 with double quantisation and bf16 compute (the paper's setting)."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def library_versions() -> dict[str, str]:
    """Versions of everything that can change an output."""
    out = {p: _version(p) for p in ("torch", "transformers", "tokenizers", "accelerate", "bitsandbytes",
                                    "flash_attn", "pillow")}
    out["python"] = platform.python_version()
    out["cuda"] = torch.version.cuda or "none"
    return out
