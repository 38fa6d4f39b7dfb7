"""The runner contract: prompts in, responses out, every response carrying its provenance.

HF models, API providers and reference policies all implement `Runner`. Batching (HF) or
concurrency (APIs) happens inside the runner; `generate` yields each response as soon as it is
complete so the trial store can persist it at once (a killed run loses nothing it paid for).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from omegaconf import DictConfig, ListConfig, OmegaConf

from facet_probe.core.errors import RunnerError  # noqa: F401 (imported from here too)
from facet_probe.core.prompts import Prompt


@dataclass(frozen=True)
class Request:
    """One call to make: the store key, the prompt, and the sampling seed for this repeat.

    `seed` is None under greedy decoding; with sampling it differs per repeat so the same-order
    control measures decoder noise.
    """

    key: str
    prompt: Prompt
    seed: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Response:
    """A model's reply and how it was produced.

    `text` is the answer text with any thinking trace removed (`thinking`). `error` is set, and
    `text` empty, when the call failed for good after retries; such trials are stored as errors and
    retried by the next run. `provenance` records what was actually used (model revision, dtype,
    attention implementation, quantisation, device, settings sent, settings omitted, library
    versions); `usage` holds token counts.
    """

    text: str
    thinking: str | None = None
    error: str | None = None
    latency_s: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Runner(Protocol):
    """What the audit needs from a model."""

    name: str

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes the output: model id, revision, every generation setting.

        Hashed into each trial key, so changing any setting never reuses stale trials.
        """
        ...

    def preflight(self) -> None:
        """Cheap checks of what `check_ready` needs (keys, files, extras) without loading weights: the
        audit runs it for every model of a panel before the first call."""
        ...

    def check_ready(self) -> None:
        """Raise `RunnerError` before any call if the runner cannot work (key, weights, extras)."""
        ...

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        """Answer every request; yield (request, response) pairs in completion order."""
        ...

    def close(self) -> None:
        """Release models, sessions and threads."""
        ...


#: What the audit calls on a model: `Runner`'s methods, read from the protocol.
RUNNER_METHODS = tuple(name for name, _ in inspect.getmembers(Runner, inspect.isfunction) if not name.startswith("_"))


def check_runner_target(node: Mapping[str, Any], where: str) -> None:
    """Refuse a model config whose `_target_` names a class that is no runner (it lacks `Runner`'s methods) before
    the class is built: the audit called `preflight` on whatever it built (an AttributeError)."""
    from hydra.utils import get_object

    from facet_probe.core.errors import ConfigError

    target = node.get("_target_")
    try:
        cls = get_object(str(target))
    except (ImportError, AttributeError, ValueError):  # not importable: instantiating it says so (app.boundary)
        return
    if missing := [name for name in RUNNER_METHODS if not callable(getattr(cls, name, None))]:
        raise ConfigError(f"{where}: _target_ {target!r} is not a runner (it lacks {', '.join(missing)}, the methods of "
                          "facet_probe.runners.base.Runner); name a runner class (docs/plugins.md, 'A model family')")


def plain(value: Any) -> Any:
    """OmegaConf nodes (Hydra passes nested config as them) as plain dicts and lists, for fingerprints and
    records; anything else as it is."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def generate_all(runner: Runner, requests: Iterable[Request]) -> dict[str, Response]:
    """Convenience for tests and scripts: run everything and return responses by key."""
    return {req.key: resp for req, resp in runner.generate(list(requests))}
