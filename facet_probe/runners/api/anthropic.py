"""Claude through the anthropic SDK (`AsyncAnthropic().messages.create`).

`generation` holds Messages API fields (max_tokens, thinking, output_config, ...). anthropic 2.x no longer
has keyword arguments for the sampling parameters (temperature, top_p, top_k); when a config sends one it
goes in `extra_body`, so it still reaches the API. Thinking blocks become `Response.thinking`. The API has
no seed: a request's seed is recorded as omitted.
"""

from __future__ import annotations

import base64
import inspect
from functools import cache
from typing import TYPE_CHECKING, Any

from facet_probe.core.extras import optional
from facet_probe.core.prompts import ImagePart, Prompt
from facet_probe.runners.api.base import ApiRunner, image_mime, not_supported
from facet_probe.runners.api.ratelimit import event_hooks
from facet_probe.runners.base import Request, Response, RunnerError

#: The SDK ([api] extra); None without it, when constructing the runner says what to install (ApiRunner).
if TYPE_CHECKING:
    import anthropic
else:
    anthropic = optional("anthropic")


@cache
def create_params() -> frozenset[str]:
    """The keyword arguments `messages.create` takes (the rest of `generation` goes in `extra_body`)."""
    return frozenset(inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters) - {
        "self", "stream", "timeout", "extra_body", "extra_headers", "extra_query"}


def to_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Prompt messages as Messages API content blocks, in display order (images as base64 sources)."""
    messages = []
    for msg in prompt.messages:
        blocks: list[dict[str, Any]] = []
        for part in msg.parts:
            if isinstance(part, ImagePart):
                data = part.image.read_bytes()
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": image_mime(data),
                                                           "data": base64.b64encode(data).decode()}})
            else:
                blocks.append({"type": "text", "text": part.text})
        messages.append({"role": msg.role, "content": blocks})
    return messages


def usage_of(usage: Any) -> dict[str, int]:
    """Normalised usage (Anthropic's output_tokens already include thinking tokens)."""
    if usage is None:
        return {}
    cached = usage.cache_read_input_tokens or 0
    fresh = usage.input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return {"input_tokens": fresh + cached + written, "output_tokens": usage.output_tokens or 0,
            "cached_input_tokens": cached}


class AnthropicRunner(ApiRunner):
    provider = "anthropic"
    api = "messages.create"
    sdk_dist = "anthropic"
    sdk_module = "anthropic"
    key_envs = ("ANTHROPIC_API_KEY",)

    def validate_settings(self) -> None:
        sent = self.settings_sent
        if not isinstance(sent.get("max_tokens"), int):
            raise RunnerError(f"model config {self.name}: generation.max_tokens (an integer) is required")
        thinking = sent.get("thinking") or {}
        budget = thinking.get("budget_tokens")
        budget_ok = isinstance(budget, int) and budget < sent["max_tokens"]
        if thinking.get("type") == "enabled" and not budget_ok:
            raise RunnerError(f"model config {self.name}: thinking.budget_tokens ({budget}) must be an "
                              f"integer below max_tokens ({sent['max_tokens']})")
        clash = {"model", "messages", "system"} & set(sent)
        if clash:
            raise RunnerError(f"model config {self.name}: {sorted(clash)} come from the model id and the "
                              "prompt")

    def open_client(self, api_key: str | None) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(api_key=api_key, base_url=self.base_url, max_retries=0,
                                        timeout=self.concurrency.timeout_s,
                                        http_client=anthropic.DefaultAsyncHttpxClient(
                                            event_hooks=event_hooks()))

    async def call(self, client: anthropic.AsyncAnthropic, request: Request) -> Response:
        prompt = request.prompt
        kwargs = {k: v for k, v in self.settings_sent.items() if k in create_params()}
        extra = {k: v for k, v in self.settings_sent.items() if k not in create_params()}
        if prompt.system:
            kwargs["system"] = prompt.system
        reply = await client.messages.create(
            model=self.model_id, messages=to_messages(prompt),  # type: ignore[arg-type]  # the SDK types requests as TypedDicts: ours are plain dicts of their shape
            extra_body=extra or None, **kwargs)
        text, thinking, redacted = "", "", 0
        for block in reply.content:
            if block.type == "text":
                text += block.text
            elif block.type == "thinking":
                thinking += block.thinking
            elif block.type == "redacted_thinking":
                redacted += 1
        omitted = ({} if request.seed is None
                   else not_supported("seed", "the Messages API has no seed", request.seed))
        return self.response(text, thinking, usage_of(reply.usage), omitted=omitted,
                             finish_reason=reply.stop_reason, response_model=reply.model,
                             response_id=reply.id, redacted_thinking_blocks=redacted or None)
