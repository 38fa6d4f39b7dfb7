"""The runner contract: prompts in, responses out, every response carrying its provenance.

HF models, API providers and reference policies all implement `Runner`. Batching (HF) or
concurrency (APIs) happens inside the runner; `generate` yields each response as soon as it is
complete so the trial store can persist it at once (a killed run loses nothing it paid for).

Beyond `Runner`, a runner may offer optional capabilities, each a small Protocol below (`CostReporting`,
`Rekeying`, `WhiteBox`, `BatchedWhiteBox`, `TurnEnding`); it offers one by having its members (the built-in
runners subclass the protocols they offer, to say so). The package asks what a built runner offers in one place,
`declared(runner)`, and what a config's class lacks before it is built with `missing_methods`; a runner that
offers nothing beyond `Runner` (a plain plug-in) runs the audit all the same.
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


# ---------------------------------------------------------------- optional capabilities

@runtime_checkable
class CostReporting(Protocol):
    """Its answers cost money (an API model): it reports what its calls cost, and the trial store fsyncs each
    answer under `store.durability=auto` (a lost trial is paid for twice)."""

    def cost_summary(self) -> dict[str, Any]:
        """Totals over this runner's calls: calls, errors, tokens and estimated cost (USD)."""
        ...


@runtime_checkable
class Rekeying(Protocol):
    """Older fingerprints of the same calls: stored trials made under them are re-keyed on resume, never
    called again."""

    def legacy_fingerprints(self) -> list[dict[str, Any]]:
        """Each older fingerprint, with the provenance a stored record must show to count as this call."""
        ...


@runtime_checkable
class WhiteBox(Protocol):
    """A local model an attack can take pixel gradients through (`runners.hf.base` documents each method)."""

    def encode(self, prompt: Prompt, target_text: str | None = None) -> Any: ...

    def pixel_inputs(self, images01: Sequence[Any]) -> dict[str, Any]: ...

    def forward_logits(self, encoded: Any, pixel_inputs: dict[str, Any], positions: Sequence[int]) -> Any: ...

    def generate_text(self, encoded: Any, pixel_inputs: dict[str, Any], max_new_tokens: int) -> str: ...

    @property
    def input_device(self) -> Any:
        """The device the model takes its inputs on."""
        ...

    @classmethod
    def attack_config_errors(cls, node: Any) -> list[str]:
        """What in the model config `node` an attack cannot run with (one message each), checked before loading."""
        ...


@runtime_checkable
class BatchedWhiteBox(Protocol):
    """`WhiteBox`'s logits and replies for several samples in one call (the attack's `batch_size`)."""

    def forward_logits_batch(self, encoded: Sequence[Any], pixel_inputs: Sequence[dict[str, Any]],
                             positions: Sequence[Sequence[int]]) -> list[Any]: ...

    def generate_texts(self, encoded: Sequence[Any], pixel_inputs: Sequence[dict[str, Any]],
                       max_new_tokens: int) -> list[str]: ...


@runtime_checkable
class TurnEnding(Protocol):
    """What closes a reply in the family's conversation format: its end-of-turn text (None: the model's first
    generation EOS, read from the loaded `model`'s generation config; `model` is None before loading)."""

    end_of_turn: str | None
    model: Any


@dataclass(frozen=True)
class Capabilities:
    """What a runner offers beyond `Runner`: each field is the runner itself, typed as the capability, or None
    where it offers no such thing."""

    cost: CostReporting | None = None
    rekeying: Rekeying | None = None
    batched: BatchedWhiteBox | None = None
    turn_ending: TurnEnding | None = None


def declared(runner: object) -> Capabilities:
    """The optional capabilities `runner` offers: the one place the package asks (a plain plug-in runner offers
    none and gets the defaults: no cost reported, grouped fsync, nothing re-keyed, one attack sample a call)."""
    return Capabilities(cost=runner if isinstance(runner, CostReporting) else None,
                        rekeying=runner if isinstance(runner, Rekeying) else None,
                        batched=runner if isinstance(runner, BatchedWhiteBox) else None,
                        turn_ending=runner if isinstance(runner, TurnEnding) else None)


def protocol_methods(protocol: type) -> tuple[str, ...]:
    """A protocol's public methods, read from the protocol itself."""
    return tuple(name for name, member in inspect.getmembers(protocol)
                 if (inspect.isfunction(member) or inspect.ismethod(member)) and not name.startswith("_"))


def missing_methods(cls: type, protocol: type) -> list[str]:
    """The methods of `protocol` that class `cls` lacks: a config's `_target_` is checked before it is built."""
    return [name for name in protocol_methods(protocol) if not callable(getattr(cls, name, None))]


#: What the audit calls on a model: `Runner`'s methods, read from the protocol.
RUNNER_METHODS = protocol_methods(Runner)


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
    if missing := missing_methods(cls, Runner):
        raise ConfigError(f"{where}: _target_ {target!r} is not a runner (it lacks {', '.join(missing)}, the methods of "
                          "facet_probe.runners.base.Runner); name a runner class (docs/plugins.md, 'A model family')")


def plain(value: Any) -> Any:
    """OmegaConf nodes (Hydra passes nested config as them) as plain dicts and lists, for fingerprints and
    records; anything else as it is."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


class RunnerWrapper:
    """A runner around another (`wrapped`): `Runner`'s methods but `generate` are the wrapped runner's. A subclass
    makes the calls its own way (`generate`) and forwards anything else it offers method by method (a capability
    it declares), never every attribute."""

    def __init__(self, wrapped: Runner) -> None:
        self.name = wrapped.name
        self._wrapped = wrapped

    def fingerprint(self) -> dict[str, Any]:
        return self._wrapped.fingerprint()

    def preflight(self) -> None:
        self._wrapped.preflight()

    def check_ready(self) -> None:
        self._wrapped.check_ready()

    def close(self) -> None:
        self._wrapped.close()


def generate_all(runner: Runner, requests: Iterable[Request]) -> dict[str, Response]:
    """Convenience for tests and scripts: run everything and return responses by key."""
    return {req.key: resp for req, resp in runner.generate(list(requests))}
