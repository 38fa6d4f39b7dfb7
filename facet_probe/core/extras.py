"""The optional dependencies (pyproject.toml's extras) and the one line naming the extra to install when a run
needs an absent one (`MissingExtra`: a user error, exit 2, no traceback).

Every place that imports an optional package goes through here, so the message is made in one place:
`require` (import it, or MissingExtra), `missing` (the MissingExtra for a failed import block), `optional` (a
module-level name, None without the extra), `check_extra` (an app's entry: is everything its extra installs
here, before any work) and `installed` (a fallback decision).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from types import ModuleType

from facet_probe.core.errors import ConfigError

#: The modules each runtime extra installs (pyproject.toml [project.optional-dependencies]); the offline
#: default audit imports none of them (tests/house/test_offline_imports.py).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "api": ("anthropic", "openai", "google.genai"),
    "odi": ("pymc", "pytensor", "arviz", "nutpie", "jax", "numpyro"),
    "quant": ("bitsandbytes",),
    "adapters": ("peft",),
    "tracking": ("mlflow",),
    "wandb": ("wandb",),
    "datasets": ("datasets",),
    "lm_eval": ("lm_eval",),
}


#: CUDA kernels whose builds import torch: pip's build isolation hides the installed torch from them (`No module
#: named 'torch'`), so no extra can carry them; they are installed after torch, on a CUDA machine, with
#: `pip_install_against_torch` (docs/hf_models.md, "First GPU run"). Distribution -> what it runs.
BUILT_AGAINST_TORCH = {"flash-attn": "FlashAttention-2 (model.attn_implementation)",
                       "causal-conv1d": "the short convolutions of Qwen3.5's Gated-DeltaNet layers"}


class MissingExtra(ConfigError):
    """A run needs an optional package that is not installed; the message names the pip command."""


def pip_install(extra: str) -> str:
    """The command that installs an extra: `pip install 'facet_probe[<extra>]'`."""
    return f"pip install 'facet_probe[{extra}]'"


def pip_install_against_torch(*distributions: str) -> str:
    """The command that builds CUDA kernels against the installed torch (`BUILT_AGAINST_TORCH`):
    `pip install <distributions> --no-build-isolation`."""
    return f"pip install {' '.join(distributions)} --no-build-isolation"


def needs_message(who: str, what: str, extra: str, instead: str = "") -> str:
    """'<who> needs <what>: pip install 'facet_probe[<extra>]'[, or <instead>]'."""
    return f"{who} needs {what}: {pip_install(extra)}" + (f", or {instead}" if instead else "")


def installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (False when its parent package is absent
    or a test has set it to None in sys.modules, as Python's import then refuses it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(exc: ModuleNotFoundError, extra: str, who: str, what: str | None = None, module: str = "",
            instead: str = "") -> MissingExtra:
    """The MissingExtra for an import that failed with `exc`: it names the module that is absent (`what`
    stands for it when that module is `module` or a parent of it, e.g. "the anthropic SDK")."""
    gone = exc.name or module or "a package"
    named = what if what and module and (module == gone or module.startswith(gone + ".")) else gone
    return MissingExtra(needs_message(who, named, extra, instead))


def require(module: str, extra: str, who: str, what: str | None = None, instead: str = "") -> ModuleType:
    """`module`, imported; MissingExtra ('<who> needs <what>: pip install ...') when it (or a package it
    imports) is not installed. Another ImportError (a broken install) stays a crash with its traceback."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise missing(exc, extra, who, what, module, instead) from exc


def optional(module: str) -> ModuleType | None:
    """`module`, imported, or None when it is not installed: a module-level name whose users call `require`
    first (an API runner's constructor), so that the module itself imports without its extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        return None


def check_extra(extra: str, who: str, modules: Iterable[str] | None = None) -> None:
    """MissingExtra naming every module of `extra` (default: all it installs) that is not installed, so an app
    says it once before any work instead of failing at the first import deep inside."""
    absent = [m for m in (modules or EXTRA_MODULES[extra]) if not installed(m)]
    if absent:
        raise MissingExtra(needs_message(who, ", ".join(absent), extra))
