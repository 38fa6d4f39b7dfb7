"""facet_probe: order-sensitivity audits and adversarial chain-of-thought attacks for multimodal LLMs.

From Python: `facet_probe.run_audit([...overrides])`, `run_attack`, `run_judge`, `run_report`, `run_odi`, `run_paper`
(facet_probe.api; docs/api.md). They are loaded on first use, so `import facet_probe.<module>` stays light, and
their names are not module names: importing `facet_probe.audit.plan` (a module) must not replace a function."""

from __future__ import annotations

from typing import Any

from facet_probe import _moved

__version__ = "0.1.0"
_moved.install()  # 0.1 import paths keep working for a release (facet_probe/_moved.py)

#: The package's Python API: name here -> function of facet_probe.api.
_API = {"run_audit": "audit", "run_attack": "attack", "run_judge": "judge", "run_report": "report", "run_odi": "odi",
        "run_paper": "paper", "RunResult": "RunResult"}
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from facet_probe import api

        return getattr(api, _API[name])
    raise AttributeError(f"module 'facet_probe' has no attribute {name!r}")
