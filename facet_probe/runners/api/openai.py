"""OpenAI models through the Responses API (`AsyncOpenAI().responses.create`).

`generation` holds Responses API fields (max_output_tokens, reasoning: {effort, summary}, store, ...);
GPT-5.x reasoning models reject temperature and top_p, so their configs list those under `omit`. The
system text goes in `instructions`; images are `input_image` data URLs with the configured `image_detail`.
Reasoning summaries (when requested) become `Response.thinking`. The API has no seed: a request's seed is
recorded as omitted.
"""

from __future__ import annotations

import base64
import inspect
from typing import TYPE_CHECKING, Any

from facet_probe.core.extras import optional
from facet_probe.core.prompts import ImagePart, Prompt, TextPart
from facet_probe.runners.api.base import ApiRunner, image_mime, not_supported
from facet_probe.runners.api.ratelimit import event_hooks
from facet_probe.runners.base import Request, Response, RunnerError

#: The SDK ([api] extra); None without it, when constructing the runner says what to install (ApiRunner).
if TYPE_CHECKING:
    import openai
else:
    openai = optional("openai")

_PER_CALL = {"model", "input", "instructions", "stream", "timeout", "extra_body", "extra_headers",
             "extra_query"}


def data_url(data: bytes) -> str:
    return f"data:{image_mime(data)};base64,{base64.b64encode(data).decode()}"


def to_input(prompt: Prompt, detail: str) -> list[dict[str, Any]]:
    """Prompt messages as Responses input items, parts in display order (assistant turns as text)."""
    items: list[dict[str, Any]] = []
    for msg in prompt.messages:
        if msg.role == "assistant":
            if any(isinstance(p, ImagePart) for p in msg.parts):
                raise RunnerError("the Responses API takes no images in assistant turns; put them in a user "
                                  "turn")
            items.append({"role": "assistant", "content": msg.text()})
            continue
        content = [{"type": "input_text", "text": p.text} if isinstance(p, TextPart)
                   else {"type": "input_image", "image_url": data_url(p.image.read_bytes()), "detail": detail}
                   for p in msg.parts]
        items.append({"role": "user", "content": content})
    return items


def reasoning_text(output: list[Any]) -> str:
    """Reasoning summary text from the response's output items."""
    return "\n".join(s.text for item in output if item.type == "reasoning" for s in (item.summary or []))


def usage_of(usage: Any) -> dict[str, int]:
    """Normalised usage (output_tokens include reasoning tokens)."""
    if usage is None:
        return {}
    reasoning = getattr(usage.output_tokens_details, "reasoning_tokens", 0) or 0
    cached = getattr(usage.input_tokens_details, "cached_tokens", 0) or 0
    return {"input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0,
            "thinking_tokens": reasoning, "cached_input_tokens": cached,
            "total_tokens": usage.total_tokens or 0}


class OpenAIRunner(ApiRunner):
    provider = "openai"
    api = "responses.create"
    sdk_dist = "openai"
    sdk_module = "openai"
    key_envs = ("OPENAI_API_KEY",)

    def __init__(self, *, image_detail: str = "auto", **kwargs: Any) -> None:
        self.image_detail = image_detail
        super().__init__(**kwargs)

    def validate_settings(self) -> None:
        from openai.resources.responses.responses import AsyncResponses

        params = set(inspect.signature(AsyncResponses.create).parameters) - {"self"}
        unknown = sorted(set(self.settings_sent) - (params - _PER_CALL))
        if unknown:
            raise RunnerError(f"model config {self.name}: {unknown} are not Responses API settings "
                              "(or are set per call)")
        if self.image_detail not in ("auto", "low", "high", "original"):
            raise RunnerError(f"model config {self.name}: image_detail must be auto, low, high or original")

    def fingerprint_extra(self) -> dict[str, Any]:
        return {"image_detail": self.image_detail}

    def open_client(self, api_key: str | None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=api_key, base_url=self.base_url, max_retries=0,
                                  timeout=self.concurrency.timeout_s,
                                  http_client=openai.DefaultAsyncHttpxClient(event_hooks=event_hooks()))

    async def call(self, client: openai.AsyncOpenAI, request: Request) -> Response:
        prompt = request.prompt
        extra = {"instructions": prompt.system} if prompt.system else {}
        reply = await client.responses.create(  # type: ignore[call-overload]  # the SDK types requests as TypedDicts: ours are plain dicts of their shape
            model=self.model_id, input=to_input(prompt, self.image_detail), **extra, **self.settings_sent)
        incomplete = getattr(reply.incomplete_details, "reason", None)
        omitted = {} if request.seed is None else not_supported("seed", "the Responses API has no seed",
                                                                request.seed)
        return self.response(reply.output_text, reasoning_text(reply.output), usage_of(reply.usage),
                             omitted=omitted, finish_reason=incomplete or reply.status,
                             response_model=reply.model, response_id=reply.id)
