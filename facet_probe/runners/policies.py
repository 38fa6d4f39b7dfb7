"""Reference policies: simulators (not models) whose answers follow from the gold and the display.

They let the pipeline be tested end to end with exactly predictable results: `oracle` always answers
the gold (no flips, accuracy 1); `always_first` always picks what is shown first (its flips follow
from the manifest); `seeded_random` answers uniformly at random; `position_biased` picks the first
slot with probability `p`, else the gold. Random draws are seeded per request key, so a rerun gives
the same answers.

They read two hints the audit puts in `Request.metadata`: `gold` (the gold as the model should say
it: displayed letter, short answer, or function name) and `first` (what answering "the first
displayed option" means). `seeded_random` draws from `prompt.labels`, or for free-form prompts from
`metadata["candidates"]`. Replies use the instructed form of `prompt.mode`
(`facet_probe.facets.prompts.format_answer`). `latency_s` simulates a slow model (it changes no
answer, so it stays out of the fingerprint). They take no temperature: a `generation` setting is refused
with a message saying so (nothing would be sampled).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from facet_probe.core.prompts import PromptMode
from facet_probe.facets.prompts import format_answer
from facet_probe.runners.base import Request, Response, RunnerError

#: Bump when a policy's answers for the same requests change (part of every fingerprint).
POLICY_VERSION = "1"

RATIONALES = {
    "gold": "The evidence given supports this answer.",
    "first": "The first option shown looks right.",
    "random": "Any of the options could be right, so this one is a guess.",
}


def request_rng(seed: int, key: str) -> random.Random:
    """A generator seeded by (policy seed, request key): same request, same draw, in any process."""
    digest = hashlib.sha256(f"{seed}\x1f{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def refuse_decoding(name: str, generation: dict[str, Any] | None) -> None:
    """A policy has no decoder: a temperature (or any decoding setting) given to it would change nothing, so it
    is refused rather than silently ignored (a temperature grid over a policy would report decoder noise that
    no setting made)."""
    if not generation:
        return
    given = ", ".join(f"generation.{k}={v}" for k, v in dict(generation).items())
    raise ValueError(f"{name} is a reference policy (a simulator, not a model): it takes no temperature or other "
                     f"decoding setting (got {given}); its answers follow from the gold and the display "
                     "(seeded_random and position_biased draw from `seed` and the request, so each repeat is a "
                     "draw of its own whatever the temperature). Leave model.generation out, or run a temperature "
                     "grid on a model that samples (model=tiny_vlm)")


def hint(request: Request, name: str) -> str:
    """A policy hint from the request metadata; a missing one is a wiring error, so it fails loudly."""
    value = request.metadata.get(name)
    if value is None or not str(value).strip():
        raise RunnerError(f"request {request.key}: reference policies need request.metadata[{name!r}] "
                          f"(set by the audit from the item and the displayed order); got {value!r}")
    return str(value)


class ReferencePolicy:
    """Base of the simulators: answer each request with `choose`, in the prompt's instructed form."""

    policy: ClassVar[str]

    def __init__(self, name: str | None = None, seed: int = 0, latency_s: float = 0.0,
                 generation: dict[str, Any] | None = None) -> None:
        self.name = name or self.policy
        refuse_decoding(self.name, generation)
        self.seed = int(seed)
        if latency_s < 0:
            raise ValueError(f"{self.name}: latency_s must be >= 0, got {latency_s!r}")
        #: Simulated seconds per call (to exercise progress, kills and resume); it changes no answer, so
        #: it is not part of the fingerprint.
        self.latency_s = float(latency_s)

    def parameters(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def fingerprint(self) -> dict[str, Any]:
        return {"runner": "reference_policy", "policy": self.policy, "policy_version": POLICY_VERSION,
                **self.parameters()}

    def preflight(self) -> None:
        """Policies need nothing: no weights, no keys, no network."""

    def check_ready(self) -> None:
        """Policies need nothing: no weights, no keys, no network."""

    def choose(self, request: Request) -> tuple[str, str]:
        """(answer, which rationale) for one request."""
        raise NotImplementedError

    def answer(self, request: Request) -> Response:
        choice, why = self.choose(request)
        rationale = RATIONALES[why] if request.prompt.mode == PromptMode.COT else ""
        text = format_answer(request.prompt.mode, choice, rationale)
        if self.latency_s:
            time.sleep(self.latency_s)
        return Response(text=text, latency_s=self.latency_s,
                        provenance={"simulator": True, **self.fingerprint(), "chose": why})

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        for request in requests:
            yield request, self.answer(request)

    def close(self) -> None:
        """Nothing to release."""


class OraclePolicy(ReferencePolicy):
    """Always answers the gold."""

    policy = "oracle"

    def choose(self, request: Request) -> tuple[str, str]:
        return hint(request, "gold"), "gold"


class AlwaysFirstPolicy(ReferencePolicy):
    """Always answers what is displayed first (slot 0)."""

    policy = "always_first"

    def choose(self, request: Request) -> tuple[str, str]:
        return hint(request, "first"), "first"


class SeededRandomPolicy(ReferencePolicy):
    """Answers uniformly over the displayed labels (or the given free-form candidates)."""

    policy = "seeded_random"

    def choose(self, request: Request) -> tuple[str, str]:
        options = list(request.prompt.labels) or list(request.metadata.get("candidates") or [])
        if not options:
            raise RunnerError(f"request {request.key}: seeded_random needs option labels in the prompt or "
                              "request.metadata['candidates'] (the possible free-form answers)")
        return request_rng(self.seed, request.key).choice(options), "random"


class PositionBiasedPolicy(ReferencePolicy):
    """Answers the first displayed option with probability `p`, else the gold."""

    policy = "position_biased"

    def __init__(self, name: str | None = None, p: float = 0.5, seed: int = 0, latency_s: float = 0.0,
                 generation: dict[str, Any] | None = None) -> None:
        super().__init__(name, seed, latency_s, generation)
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"position_biased: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)

    def parameters(self) -> dict[str, Any]:
        return {"p": self.p, "seed": self.seed}

    def choose(self, request: Request) -> tuple[str, str]:
        if request_rng(self.seed, request.key).random() < self.p:
            return hint(request, "first"), "first"
        return hint(request, "gold"), "gold"


POLICIES: dict[str, type[ReferencePolicy]] = {
    cls.policy: cls for cls in (OraclePolicy, AlwaysFirstPolicy, SeededRandomPolicy, PositionBiasedPolicy)}
