"""The thin base shared by the API adapters: settings, keys, provenance, cost, and the call engine.

An adapter says how to open its SDK's async client and how to make one call (translate the `Prompt`, call,
read text / thinking / usage back); this base does the rest. Settings come from the model config:
`generation` is what the paper asks for, `omit` names the settings the API rejects (each with its reason);
everything in `generation` but not in `omit` is sent, and every response's provenance records both.
API keys are read from the environment when a client is opened and are never stored, logged or recorded;
every error text is scrubbed of them, of a base_url's user:password in each form it takes on the wire, and of
any credential by its form (`facet_probe.core.redact`). A base_url's user:password is sent as HTTP Basic auth,
which takes the `Authorization` header: a runner says what that does to its key in one line when it is
made (`url_credentials_note`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, fields
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from facet_probe.core.console import say
from facet_probe.core.extras import require
from facet_probe.core.redact import env_secrets, redact_text, url_credentials
from facet_probe.runners.api.concurrency import CallEngine, ConcurrencySettings, EngineStats
from facet_probe.runners.api.failures import Failure, classify_exception
from facet_probe.runners.api.settings import check_generation
from facet_probe.runners.base import CostReporting, Request, Response, RunnerError, plain

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, for cost estimates only (thinking tokens are billed as output)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cached_input_per_mtok: float | None = None

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> Prices:
        cfg = dict(plain(cfg) or {})
        known = {f.name for f in fields(cls)}
        if set(cfg) - known:
            raise ValueError(f"unknown price keys {sorted(set(cfg) - known)}; known: {sorted(known)}")
        return cls(**cfg)

    def cost(self, usage: dict[str, int]) -> float:
        """Estimated cost of one call from its normalised usage."""
        cached = usage.get("cached_input_tokens", 0)
        cached_rate = self.cached_input_per_mtok
        if cached_rate is None:
            cached_rate = self.input_per_mtok
        fresh = usage.get("input_tokens", 0) - cached
        return (fresh * self.input_per_mtok + cached * cached_rate
                + usage.get("output_tokens", 0) * self.output_per_mtok) / 1e6


def image_mime(data: bytes) -> str:
    """MIME type from an image's magic bytes (PNG, JPEG, GIF, WebP); anything else is a clear error."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise RunnerError(f"unsupported image format (first bytes {data[:8]!r}); API providers take PNG, JPEG, "
                      "GIF or WebP: convert the image first")


@functools.cache
def sdk_version(dist: str) -> str:
    """`dist==version` of an SDK, read once per process (the SDK that runs is the one imported)."""
    try:
        return f"{dist}=={version(dist)}"
    except PackageNotFoundError:
        return f"{dist}==unknown"


@functools.lru_cache(maxsize=64)
def safe_url(url: str | None) -> str | None:
    """A base URL without any user:password part, fit for records (every response records its runner's)."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def omitted_settings(generation: dict[str, Any], omit: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`omit` entries (a reason, or {value, reason} for a setting not in `generation`) as {value, reason}."""
    out = {}
    for key, spec in omit.items():
        if isinstance(spec, dict):
            if "reason" not in spec:
                raise RunnerError(f"omit.{key} needs a `reason`")
            out[key] = {"value": spec.get("value", generation.get(key)), "reason": str(spec["reason"])}
        else:
            out[key] = {"value": generation.get(key), "reason": str(spec)}
    return out


class ApiRunner(CostReporting):
    """Shared behaviour of the API runners (implements the `Runner` protocol; its calls cost money, so it reports
    their cost: `CostReporting`)."""

    provider: ClassVar[str]
    api: ClassVar[str]  # the SDK method used, e.g. "responses.create"
    sdk_dist: ClassVar[str]  # the SDK's distribution name, for provenance
    sdk_module: ClassVar[str | None] = None  # the SDK's module ([api] extra), checked when a runner is made
    key_envs: tuple[str, ...]  # environment variables tried in order (a runner may set its own: openai_compat)
    key_required: ClassVar[bool] = True
    #: The header the SDK sends the API key in. A base_url's user:password goes as HTTP Basic auth in the
    #: Authorization header: in place of a key sent there, beside a key sent in a header of its own.
    key_header: ClassVar[str] = "Authorization"
    #: The detail images are sent at, which their token estimate follows (OpenAI's `image_detail` setting; the
    #: other providers take none).
    image_detail: str = "auto"

    def __init__(self, *, name: str, model_id: str, revision: str | None = None,
                 local_path: str | None = None, generation: dict[str, Any] | None = None,
                 omit: dict[str, Any] | None = None,
                 concurrency: dict[str, Any] | None = None, prices: dict[str, Any] | None = None,
                 base_url: str | None = None, extra_body: dict[str, Any] | None = None) -> None:
        if self.sdk_module:  # before anything reads the SDK: one line naming the extra when it is absent
            require(self.sdk_module, "api", f"model {name}", f"the {self.sdk_dist} SDK")
        self.name = name
        self.model_id = model_id
        self.revision = revision
        self.local_path = local_path
        self.base_url = base_url
        if note := self.url_credentials_note():
            say(log, logging.INFO, note)
        self.generation: dict[str, Any] = dict(plain(generation) or {})
        self.settings_omitted = omitted_settings(self.generation, plain(omit) or {})
        self.settings_sent = {k: v for k, v in self.generation.items() if k not in self.settings_omitted}
        check_generation(name, self.api, self.settings_sent)  # a misspelt key fails here, not at the API
        self.settings_sent.update(plain(extra_body) or {})  # deliberate extras, sent as they are
        try:
            self.concurrency = ConcurrencySettings.from_config(plain(concurrency))
            self.prices = Prices.from_config(prices)
        except (TypeError, ValueError) as exc:
            raise RunnerError(f"model config {name}: {exc}") from None
        self.totals: Counter = Counter()
        self.last_stats: EngineStats | None = None
        self._answered: dict[str, Response] = {}
        self.validate_settings()

    # -- adapter hooks ---------------------------------------------------------------------------------
    def validate_settings(self) -> None:
        """Raise `RunnerError` if the configured settings cannot be sent (checked at construction)."""

    def open_client(self, api_key: str | None) -> Any:
        """The SDK's async client (created inside the engine's event loop)."""
        raise NotImplementedError

    async def close_client(self, client: Any) -> None:
        await client.close()

    async def call(self, client: Any, request: Request) -> Response:
        """Make one call and return its response (use `self.response(...)` to build it)."""
        raise NotImplementedError

    def classify(self, exc: BaseException) -> Failure:
        return classify_exception(exc)

    def fingerprint_extra(self) -> dict[str, Any]:
        """Adapter-specific settings that change the output (e.g. image detail)."""
        return {}

    # -- Runner protocol -------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        cls = type(self)
        return {"runner": f"{cls.__module__}.{cls.__qualname__}", "provider": self.provider, "api": self.api,
                "model_id": self.model_id, "revision": self.revision, "settings_sent": self.settings_sent,
                "settings_omitted": sorted(self.settings_omitted), **self.fingerprint_extra()}

    def preflight(self) -> None:
        """Everything an API model needs is cheap to check (key, model id, base URL): check it all."""
        self.check_ready()

    def check_ready(self) -> None:
        if not isinstance(self.model_id, str) or not self.model_id.strip():
            raise RunnerError(f"{self.name}: model.model_id is empty; set it to the provider's model id")
        if self.base_url is not None and urlsplit(str(self.base_url)).scheme not in ("http", "https"):
            raise RunnerError(f"{self.name}: model.base_url must start with http:// or https://, "
                              f"got {safe_url(str(self.base_url))!r}")
        if self.key_required and self.api_key() is None:
            raise RunnerError(f"{self.name}: no API key; set {' or '.join(self.key_envs)} in the environment "
                              "(keys are read from the environment only, never from configs)")

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        todo = []
        for req in requests:
            if req.key in self._answered:  # answered earlier in this run: never pay twice
                yield req, self._answered[req.key]
            else:
                todo.append(req)
        engine = CallEngine(self.concurrency, classify=self.classify, scrub=self.scrub)
        try:
            for req, resp in engine.run(todo, self._session):
                self._account(resp)
                if resp.error is None:
                    self._answered[req.key] = resp
                yield req, resp
        finally:
            self.last_stats = engine.stats

    def close(self) -> None:
        self._answered.clear()

    # -- helpers for adapters --------------------------------------------------------------------------
    def api_key(self) -> str | None:
        """The first non-empty key among `key_envs` (read now, never stored)."""
        for env in self.key_envs:
            value = os.environ.get(env, "").strip()
            if value:
                return value
        return None

    def url_credentials_note(self) -> str | None:
        """One line saying what a base_url's user:password does to the API key (None without one)."""
        if not url_credentials(self.base_url):
            return None
        keys = " or ".join(self.key_envs)
        if self.key_header.lower() == "authorization":
            how = f"in place of the API key ({keys} is not sent: both would take the Authorization header)"
        else:
            how = f"beside the API key ({keys}, sent in the {self.key_header} header)"
        return f"{self.name}: the user:password in base_url is sent as HTTP Basic auth, {how}"

    def scrub(self, text: str) -> str:
        """Blank out any configured key, the base_url's user:password in each form (as written, decoded, as
        Basic auth's base64), and any credential by its form, that an SDK error message might echo."""
        keys = [v for env in self.key_envs if len(v := os.environ.get(env, "").strip()) >= 6]
        secrets = sorted({*keys, *url_credentials(self.base_url), *env_secrets()}, key=len, reverse=True)
        return redact_text(text, secrets)

    def response(self, text: str, thinking: str | None, usage: dict[str, int], *,
                 sent: dict[str, Any] | None = None, omitted: dict[str, Any] | None = None,
                 **details: Any) -> Response:
        """A `Response` with usage, estimated cost and the provenance every API call records."""
        usage = {k: int(v) for k, v in usage.items() if v is not None}
        provenance = {
            "provider": self.provider, "api": self.api, "model_id": self.model_id,
            "sdk": sdk_version(self.sdk_dist),
            "settings_sent": {**self.settings_sent, **(sent or {})},
            "settings_omitted": {**self.settings_omitted, **(omitted or {})},
            "cost_usd": round(self.prices.cost(usage), 8),
            **({"base_url": safe_url(self.base_url)} if self.base_url else {}),
            **{k: v for k, v in details.items() if v is not None},
        }
        return Response(text=text, thinking=thinking or None, usage=usage, provenance=provenance)

    def cost_summary(self) -> dict[str, Any]:
        """Totals over this runner's calls: calls, errors, tokens and estimated cost (USD)."""
        out = dict(self.totals)
        out["cost_usd"] = round(out.get("cost_usd", 0.0), 6)
        return out

    # -- internals -------------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[Any]:
        client = self.open_client(self.api_key())
        try:
            yield functools.partial(self.call, client)
        finally:
            await self.close_client(client)

    def _account(self, resp: Response) -> None:
        self.totals["calls"] += 1
        self.totals["errors"] += resp.error is not None
        for k, v in resp.usage.items():
            self.totals[k] += v
        self.totals["cost_usd"] += resp.provenance.get("cost_usd", 0.0)


def not_supported(setting: str, reason: str, value: Any) -> dict[str, Any]:
    """One entry of `settings_omitted` for a per-call value the API has no field for."""
    return {setting: {"value": value, "reason": reason}}
