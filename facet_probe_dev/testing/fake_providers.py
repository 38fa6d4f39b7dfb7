"""A loopback HTTP server that speaks the Gemini, Anthropic and OpenAI wire formats, for tests and benchmarks.

The real SDKs are pointed at it (`base_url`), so a test sees exactly what an SDK put on the wire. It records
every call (path, model, body, parsed text and image parts in order), and can add latency, enforce a
requests-per-second limit (token bucket, answered by 429 with Retry-After) and inject faults, at given rates
or as a script for the first calls: 429 with Retry-After, 500, a hang past the client's timeout, a 200 with
malformed JSON, a 400, and a 401 whose message echoes the key it got (as some providers do).

A 429 says when to come back in the form `retry_after_form` names: `retry-after-ms` plus whole-second
`retry-after` ("both"), whole seconds only ("seconds", the HTTP standard and Anthropic's form), milliseconds
only ("ms") or nothing ("none"). With `rate_limit_headers`, every answer also carries the provider's
rate-limit headers for the token bucket as it stood when the request was admitted (OpenAI:
`x-ratelimit-{limit,remaining,reset}-requests`, reset as a duration like "250ms" or "6m0s"; Anthropic:
`anthropic-ratelimit-requests-{limit,remaining,reset}`, reset as an RFC 3339 time; Gemini sends none).

Endpoints: ``POST /v1beta/models/{model}:generateContent`` (Gemini), ``POST /v1/messages`` (Anthropic),
``POST /v1/responses`` and ``POST /v1/chat/completions`` (OpenAI and OpenAI-compatible servers); the three
providers' batch APIs are in `fake_batches.py` (`server.batches`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from facet_probe_dev.testing.fake_batches import FakeBatches

FAULT_KINDS = ("rate_limit", "server_error", "timeout", "malformed", "bad_request", "unauthorized")
RETRY_AFTER_FORMS = ("both", "seconds", "ms", "none")


@dataclass
class RecordedCall:
    """One request as the server saw it, and what the server did with it."""

    provider: str  # gemini | anthropic | openai_responses | openai_chat
    path: str
    model: str
    body: dict[str, Any]
    api_key: str | None
    system: str
    parts: list[tuple[str, str]]  # ("text", text) or ("image", sha256 of the decoded bytes), in order
    roles: list[str]  # the role of each message, in order
    mime_types: list[str]
    arrived_at: float
    status: int = 0
    fault: str | None = None  # rate_limit | rpm_limit | server_error | timeout | malformed | None
    reply: str = ""

    @property
    def ok(self) -> bool:
        """A well-formed 200 answer was sent (a call the provider would bill)."""
        return self.status == 200 and self.fault is None

    def texts(self) -> list[str]:
        return [v for k, v in self.parts if k == "text"]

    def image_digests(self) -> list[str]:
        return [v for k, v in self.parts if k == "image"]


def sent_thinking_budget(node: Any) -> int | None:
    """The thinking budget anywhere in a request body (Gemini's camelCase or snake_case), None if it sent none."""
    if isinstance(node, dict):
        for key, value in node.items():
            found = value if key in ("thinkingBudget", "thinking_budget") else sent_thinking_budget(value)
            if found is not None:
                return found
    return None


def default_reply(call: RecordedCall) -> str:
    """A fixed, parseable answer that names the last text part's digest (so a test can match it back)."""
    last = call.texts()[-1] if call.texts() else ""
    return f"Answer: A [{hashlib.sha256(last.encode()).hexdigest()[:8]}]"


class _Server(ThreadingHTTPServer):
    """Quiet where a client drops its connection (a stopping run closing its idle keep-alive connections): a real
    provider logs nothing to the client's terminal then, and the traceback socketserver prints would land in the
    output of an app under test (the in-process harness captures stderr)."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
            super().handle_error(request, client_address)


@dataclass
class FakeProviderServer:
    """Threaded fake provider on 127.0.0.1; use as a context manager (`with FakeProviderServer() as srv`).

    `faults` maps a kind in FAULT_KINDS to its probability per request (the n-th arriving request gets the
    n-th draw of a seeded RNG); `script` lists the fate of the first requests (a kind or None), before any
    draw; `rps_limit` (with `burst`) rejects requests beyond the rate with 429 and a Retry-After that says
    when the next slot frees (in the form `retry_after_form` names; `rate_limit_headers` adds the provider's
    remaining/reset headers to every answer); `latency_s` (or `latency_for(call)`) delays each answer; `reply(call) -> str`
    makes the text.
    """

    latency_s: float = 0.0
    rps_limit: float | None = None
    burst: float = 1.0
    faults: dict[str, float] = field(default_factory=dict)
    fault_retry_after_s: float = 0.02
    hang_s: float = 5.0
    seed: int = 0
    reply: Callable[[RecordedCall], str] = default_reply
    thinking_text: str = "Let me weigh the evidence."
    served_models: tuple[str, ...] = ()  # what GET /v1/models lists (OpenAI-compatible servers)
    model_cards: dict[str, dict[str, Any]] = field(default_factory=dict)  # extra fields per model, e.g. vLLM's root
    script: list[str | None] = field(default_factory=list)
    latency_for: Callable[[RecordedCall], float] | None = None
    retry_after_form: str = "both"
    rate_limit_headers: bool = False
    tokens_per_s_limit: float | None = None  # a token bucket too: each call costs its usage (input + output)
    token_burst: float = 1000.0
    batch_polls: int = 1  # batch APIs (fake_batches.py): the n-th batch ends at check batch_polls * (n + 1) + 1
    batch_fail: Callable[[RecordedCall], bool] | None = None  # True: that request fails inside its batch
    calls: list[RecordedCall] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        unknown = (set(self.faults) | {k for k in self.script if k}) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; use {FAULT_KINDS}")
        if sum(self.faults.values()) > 1:
            raise ValueError("fault probabilities sum to more than 1")
        if self.retry_after_form not in RETRY_AFTER_FORMS:
            raise ValueError(f"unknown retry_after_form {self.retry_after_form!r}; use {RETRY_AFTER_FORMS}")
        self._lock = threading.Lock()
        self._rng = random.Random(self.seed)
        self._buckets = {"requests": _Bucket(self.rps_limit, self.burst),
                         "tokens": _Bucket(self.tokens_per_s_limit, self.token_burst)}
        self._stopping = threading.Event()
        self._scripted = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.batches = FakeBatches(self)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> FakeProviderServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="fake-provider",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)  # type: ignore[union-attr]
            self._server = None

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Root URL (Gemini and Anthropic base_url); OpenAI clients want `url + '/v1'`."""
        return f"http://127.0.0.1:{self.port}"

    # -- views ---------------------------------------------------------------------------------------
    def ok_calls(self) -> list[RecordedCall]:
        with self._lock:
            return [c for c in self.calls if c.ok]

    def fault_counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for c in self.calls:
                counts[c.fault or "ok"] = counts.get(c.fault or "ok", 0) + 1
            return counts

    # -- decisions (under the lock) ------------------------------------------------------------------
    def _admit(self, call: RecordedCall, tokens: int) -> tuple[float | None, dict[str, str]]:
        """Record the call, which would cost `tokens`; return (None to admit it, else the seconds until the
        rate limits free room; the rate-limit headers for the buckets as they stand after this decision)."""
        with self._lock:
            self.calls.append(call)
            now = time.monotonic()
            costs = {"requests": 1.0, "tokens": float(tokens)}
            live = {dim: b for dim, b in self._buckets.items() if b.rate is not None}
            waits = [b.wait_s(now, costs[dim]) for dim, b in live.items()]
            wait = max(waits, default=0.0)
            if wait == 0:
                for dim, bucket in live.items():
                    bucket.level -= costs[dim]
            headers: dict[str, str] = {}
            if self.rate_limit_headers:
                for dim, bucket in live.items():
                    headers |= limit_headers_for(call.provider, dim, bucket)
            return (wait or None), headers

    def _draw_fault(self) -> str | None:
        with self._lock:
            if self._scripted < len(self.script):
                self._scripted += 1
                return self.script[self._scripted - 1]
            u = self._rng.random()
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += self.faults.get(kind, 0.0)
            if u < edge:
                return kind
        return None


# -- rate-limit headers ------------------------------------------------------------------------------
def go_duration(seconds: float) -> str:
    """A duration as OpenAI writes its reset headers: "17ms", "1.5s", "6m0s"."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    if minutes < 1:
        return f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{rest:.0f}s"


def retry_after_headers(form: str, wait_s: float) -> dict[str, str]:
    """A 429's wait in the given form of RETRY_AFTER_FORMS (whole seconds round up, at least 1)."""
    seconds = {"retry-after": str(max(1, math.ceil(wait_s)))}
    millis = {"retry-after-ms": str(math.ceil(wait_s * 1000))}
    return {"both": {**seconds, **millis}, "seconds": seconds, "ms": millis, "none": {}}[form]


def gemini_retry_delay(form: str, wait_s: float) -> float | None:
    """Gemini's RetryInfo delay in the same form: none, whole seconds, or exact."""
    return None if form == "none" else float(max(1, math.ceil(wait_s))) if form == "seconds" else wait_s


@dataclass
class _Bucket:
    """A token bucket: `rate` per second (None: no limit) up to `size`, starting full."""

    rate: float | None
    size: float
    level: float = field(init=False)
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.level = self.size

    def wait_s(self, now: float, cost: float) -> float:
        """Refill to `now`; seconds until `cost` fits (0: it fits now)."""
        self.level = min(self.size, self.level + (now - self.at) * (self.rate or 0.0))
        self.at = now
        return 0.0 if self.level >= cost else (cost - self.level) / (self.rate or math.inf)


def limit_headers_for(provider: str, dim: str, bucket: _Bucket) -> dict[str, str]:
    """The provider's rate-limit headers for one bucket (`dim` requests or tokens): size, whole units
    left, time until full."""
    limit, remaining = str(int(bucket.size)), str(max(0, math.floor(bucket.level)))
    full_in_s = (bucket.size - bucket.level) / (bucket.rate or math.inf)
    if provider.startswith("openai"):
        return {f"x-ratelimit-limit-{dim}": limit, f"x-ratelimit-remaining-{dim}": remaining,
                f"x-ratelimit-reset-{dim}": go_duration(full_in_s)}
    if provider == "anthropic":
        at = datetime.now(UTC) + timedelta(seconds=full_in_s)
        return {f"anthropic-ratelimit-{dim}-limit": limit, f"anthropic-ratelimit-{dim}-remaining": remaining,
                f"anthropic-ratelimit-{dim}-reset": at.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
    return {}


# -- request parsing (what the SDK sent) -------------------------------------------------------------
def _data_url_bytes(url: str) -> tuple[str, bytes]:
    match = re.match(r"data:([^;]+);base64,(.*)", url, re.S)
    if not match:
        raise ValueError(f"not a base64 data URL: {url[:40]}")
    return match.group(1), b64decode(match.group(2))


def field_of(obj: dict[str, Any], snake: str) -> Any:
    """A JSON field by its snake_case or camelCase name (protobuf JSON takes both; google-genai mixes)."""
    head, *rest = snake.split("_")
    camel = head + "".join(w.title() for w in rest)
    return obj.get(snake, obj.get(camel))


def b64decode(text: str) -> bytes:
    """Standard or URL-safe base64, padded or not (google-genai sends URL-safe)."""
    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_parts(
    provider: str, body: dict[str, Any]
) -> tuple[str, list[str], list[tuple[str, str]], list[str]]:
    """(system text, message roles, ordered text/image parts, image MIME types) of a request body."""
    parts: list[tuple[str, str]] = []
    mimes: list[str] = []
    roles: list[str] = []

    def image(mime: str, data: bytes) -> None:
        parts.append(("image", _digest(data)))
        mimes.append(mime)

    if provider == "gemini":
        sys_parts = (field_of(body, "system_instruction") or {}).get("parts", [])
        system = "".join(p.get("text", "") for p in sys_parts)
        for content in body.get("contents", []):
            roles.append(content.get("role", "user"))
            for p in content.get("parts", []):
                if "text" in p:
                    parts.append(("text", p["text"]))
                elif field_of(p, "inline_data"):
                    blob = field_of(p, "inline_data")
                    image(field_of(blob, "mime_type"), b64decode(blob["data"]))
    elif provider == "anthropic":
        sys_field = body.get("system") or ""
        system = sys_field if isinstance(sys_field, str) else "".join(b.get("text", "") for b in sys_field)
        for msg in body.get("messages", []):
            roles.append(msg["role"])
            content = msg["content"]
            for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                if block["type"] == "text":
                    parts.append(("text", block["text"]))
                elif block["type"] == "image":
                    image(block["source"]["media_type"], b64decode(block["source"]["data"]))
    elif provider == "openai_responses":
        system = body.get("instructions") or ""
        items = body.get("input", [])
        for msg in [{"role": "user", "content": items}] if isinstance(items, str) else items:
            roles.append(msg["role"])
            content = msg["content"]
            for block in [{"type": "input_text", "text": content}] if isinstance(content, str) else content:
                if block["type"] in ("input_text", "output_text"):
                    parts.append(("text", block["text"]))
                elif block["type"] == "input_image":
                    image(*_data_url_bytes(block["image_url"]))
    else:  # openai_chat
        system = ""
        for msg in body.get("messages", []):
            content = msg["content"]
            if msg["role"] in ("system", "developer"):
                system += content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
                continue
            roles.append(msg["role"])
            for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                if block["type"] == "text":
                    parts.append(("text", block["text"]))
                elif block["type"] == "image_url":
                    image(*_data_url_bytes(block["image_url"]["url"]))
    return system, roles, parts, mimes


# -- response bodies ---------------------------------------------------------------------------------
def _tokens(call: RecordedCall) -> int:
    return 1 + sum(len(v) for _, v in call.parts) // 4 + 258 * len(call.image_digests())


def _wants_thinking(call: RecordedCall) -> bool:
    body = call.body
    if call.provider == "gemini":
        thinking = field_of(field_of(body, "generation_config") or {}, "thinking_config") or {}
        return bool(field_of(thinking, "include_thoughts"))
    if call.provider == "anthropic":
        return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    if call.provider == "openai_responses":
        return bool((body.get("reasoning") or {}).get("summary"))
    return False


def _counts(call: RecordedCall, text: str, thinking: str | None) -> tuple[int, int, int]:
    """(input, answer, thinking) tokens of an answer, derived from the sizes."""
    return _tokens(call), 1 + len(text) // 4, (1 + len(thinking) // 4) if thinking else 0


def usage_tokens(call: RecordedCall, text: str, thinking: str | None) -> int:
    """What an answer costs the token bucket: input plus output tokens, as its usage reports them."""
    return sum(_counts(call, text, thinking))


def success_body(call: RecordedCall, text: str, thinking: str | None) -> dict[str, Any]:
    """The provider's JSON for a completed answer (usage derived from the request size)."""
    n_in, n_out, n_think = _counts(call, text, thinking)
    now = int(time.time())
    if call.provider == "gemini":
        parts = ([{"text": thinking, "thought": True}] if thinking else []) + [{"text": text}]
        usage = {
            "promptTokenCount": n_in,
            "candidatesTokenCount": n_out,
            "totalTokenCount": n_in + n_out + n_think,
        }
        if n_think:
            usage["thoughtsTokenCount"] = n_think
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": call.model,
            "responseId": f"fake-{len(text)}",
        }
    if call.provider == "anthropic":
        content = [{"type": "thinking", "thinking": thinking, "signature": "sig"}] if thinking else []
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": call.model,
            "content": [*content, {"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": n_in, "output_tokens": n_out + n_think},
        }
    if call.provider == "openai_responses":
        output: list[dict[str, Any]] = []
        if thinking:
            output.append(
                {
                    "type": "reasoning",
                    "id": "rs_fake",
                    "summary": [{"type": "summary_text", "text": thinking}],
                }
            )
        output.append(
            {
                "type": "message",
                "id": "msg_fake",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
        return {
            "id": "resp_fake",
            "object": "response",
            "created_at": now,
            "status": "completed",
            "model": call.model,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "output": output,
            "usage": {
                "input_tokens": n_in,
                "output_tokens": n_out + n_think,
                "total_tokens": n_in + n_out,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": n_think},
            },
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": now,
        "model": call.model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
    }


def error_body(
    provider: str, status: int, message: str, retry_after_s: float | None = None
) -> dict[str, Any]:
    """The provider's JSON error envelope (Gemini's 429 carries a RetryInfo detail)."""
    if provider == "gemini":
        names = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED"}
        err: dict[str, Any] = {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}
        if retry_after_s is not None:
            err["details"] = [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after_s:.3f}s"}
            ]
        return {"error": err}
    kinds = {
        429: "rate_limit_error",
        500: "api_error",
        400: "invalid_request_error",
        401: "authentication_error",
    }
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
    return {
        "error": {"message": message, "type": kinds.get(status, "api_error"), "param": None, "code": None}
    }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeProviderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def setup(self) -> None:
        super().setup()  # headers and body go out in two writes: without NODELAY, Nagle adds ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for k, v in {**getattr(self, "_limit_headers", {}), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def _route(self) -> tuple[str, str] | None:
        path = self.path.split("?")[0]
        gem = re.match(r"/v1(?:beta)?/models/([^:]+):generateContent$", path)
        if gem:
            return "gemini", gem.group(1)
        return {
            "/v1/messages": ("anthropic", ""),
            "/v1/responses": ("openai_responses", ""),
            "/v1/chat/completions": ("openai_chat", ""),
        }.get(path)

    def do_GET(self) -> None:  # noqa: N802
        if self.fake.batches.handle(self, "GET", b""):
            return
        if self.path.split("?")[0] != "/v1/models":
            self._send(404, b'{"error": {"message": "no such endpoint"}}')
            return
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake", **self.fake.model_cards.get(m, {})}
            for m in self.fake.served_models
        ]
        self._send(200, json.dumps({"object": "list", "data": data}).encode())

    def do_POST(self) -> None:  # noqa: N802
        fake = self.fake
        self._limit_headers: dict[str, str] = {}
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        if fake.batches.handle(self, "POST", raw):
            return
        route = self._route()
        if route is None:
            self._send(404, b'{"error": {"message": "no such endpoint"}}')
            return
        provider, model = route
        try:
            body = json.loads(raw or b"{}")
            system, roles, parts, mimes = parse_parts(provider, body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # tell the client what was wrong
            msg = f"fake server cannot read the request: {type(exc).__name__}: {exc}"
            self._send(400, json.dumps(error_body(provider, 400, msg)).encode())
            return
        key = (
            self.headers.get("x-goog-api-key")
            or self.headers.get("x-api-key")
            or (self.headers.get("authorization") or "").removeprefix("Bearer ")
            or None
        )
        call = RecordedCall(
            provider=provider,
            path=self.path,
            model=model or body.get("model", ""),
            body=body,
            api_key=key,
            system=system,
            parts=parts,
            roles=roles,
            mime_types=mimes,
            arrived_at=time.monotonic(),
        )
        thinking = fake.thinking_text if _wants_thinking(call) else None
        wait, self._limit_headers = fake._admit(call, usage_tokens(call, fake.reply(call), thinking))
        form = fake.retry_after_form
        if wait is not None:
            call.status, call.fault = 429, "rpm_limit"
            retry_info = gemini_retry_delay(form, wait)
            self._send(
                429,
                json.dumps(error_body(provider, 429, "rate limit exceeded", retry_info)).encode(),
                retry_after_headers(form, wait),
            )
            return
        fault = fake._draw_fault()
        if fault == "rate_limit":
            call.status, call.fault = 429, fault
            ra = fake.fault_retry_after_s
            retry_info = gemini_retry_delay(form, ra)
            self._send(
                429,
                json.dumps(error_body(provider, 429, "injected rate limit", retry_info)).encode(),
                retry_after_headers(form, ra),
            )
            return
        if fault == "timeout":
            call.fault = fault
            fake._stopping.wait(fake.hang_s)
            self.close_connection = True
            return
        if fault == "unauthorized":
            call.status, call.fault = 401, fault
            msg = f"Incorrect API key provided: {key}"
            self._send(401, json.dumps(error_body(provider, 401, msg)).encode())
            return
        if fault == "bad_request":
            call.status, call.fault = 400, fault
            self._send(400, json.dumps(error_body(provider, 400, "injected bad request")).encode())
            return
        delay = fake.latency_for(call) if fake.latency_for else fake.latency_s
        if delay:
            fake._stopping.wait(delay)
        if fault == "server_error":
            call.status, call.fault = 500, fault
            self._send(500, json.dumps(error_body(provider, 500, "injected server error")).encode())
            return
        call.reply = fake.reply(call)
        payload = json.dumps(success_body(call, call.reply, thinking)).encode()
        if fault == "malformed":
            call.fault = fault
            payload = payload[: len(payload) // 2]
        call.status = 200
        self._send(200, payload)
