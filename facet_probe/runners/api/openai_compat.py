"""Self-hosted OpenAI-compatible servers (vLLM, SGLang, TGI, llama.cpp) through Chat Completions.

`model=openai_compat model.base_url=http://host:port/v1 model.model_id=<served name>`. The key comes from
`api_key_env` (default OPENAI_API_KEY) or, when unset, the server is called keyless. `generation` holds Chat
Completions fields; settings the SDK has no argument for (vLLM's top_k, repetition_penalty, ...) go in
`extra_body`. The request's seed is sent. Thinking is read from `reasoning_content` / `reasoning` (vLLM's
reasoning parsers) or from a leading `<think>...</think>` block in the text.
"""

from __future__ import annotations

import base64
import inspect
import re
from typing import Any

import openai
from openai.resources.chat.completions.completions import AsyncCompletions

from facet_probe.prompts import ImagePart, Prompt, TextPart
from facet_probe.runners.api.base import ApiRunner, image_mime, safe_url
from facet_probe.runners.api.ratelimit import event_hooks
from facet_probe.runners.base import Request, Response, RunnerError

_CREATE_PARAMS = set(inspect.signature(AsyncCompletions.create).parameters) - {
    "self", "model", "messages", "seed", "stream", "timeout", "extra_body", "extra_headers", "extra_query"}
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.S)


def to_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """System text plus chat messages, parts in display order (images as data URLs)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}] if prompt.system else []
    for msg in prompt.messages:
        content = []
        for part in msg.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            else:
                data = part.image.read_bytes()
                url = f"data:{image_mime(data)};base64,{base64.b64encode(data).decode()}"
                content.append({"type": "image_url", "image_url": {"url": url}})
        if msg.role == "assistant" and not any(isinstance(p, ImagePart) for p in msg.parts):
            messages.append({"role": "assistant", "content": msg.text()})
        else:
            messages.append({"role": msg.role, "content": content})
    return messages


def split_thinking(text: str, reasoning: str | None) -> tuple[str, str | None]:
    """(answer, thinking): a server-side reasoning field, else a leading <think> block of the text."""
    match = _THINK.match(text)
    if match:
        return text[match.end():], (reasoning or "") + match.group(1).strip()
    return text, reasoning


class OpenAICompatRunner(ApiRunner):
    provider = "openai_compat"
    api = "chat.completions.create"
    sdk_dist = "openai"
    key_envs = ("OPENAI_API_KEY",)
    key_required = False

    def __init__(self, *, api_key_env: str = "OPENAI_API_KEY", verify_model: bool = True,
                 **kwargs: Any) -> None:
        self.key_envs = (api_key_env,)
        self.verify_model = verify_model
        super().__init__(**kwargs)

    def validate_settings(self) -> None:
        clash = {"model", "messages", "seed", "stream"} & set(self.settings_sent)
        if clash:
            raise RunnerError(f"model config {self.name}: {sorted(clash)} are set per call; remove them "
                              "from `generation`")

    def check_ready(self) -> None:
        if not self.base_url:
            raise RunnerError(f"{self.name}: set model.base_url to the server's OpenAI-compatible root, "
                              "e.g. model.base_url=http://localhost:8000/v1")
        super().check_ready()
        if self.verify_model:
            self._check_served()

    def _check_served(self) -> None:
        """Ask the server which models it serves (free, no generation) and fail early on a wrong name."""
        client = openai.OpenAI(api_key=self.api_key() or "EMPTY", base_url=self.base_url, max_retries=0,
                               timeout=10)
        try:
            served = [m.id for m in client.models.list()]
        except Exception as exc:
            why = f"{type(exc).__name__}: {self.scrub(str(exc))[:200]}"
            raise RunnerError(f"{self.name}: cannot list models at {safe_url(self.base_url)} ({why}); "
                              "is the server up?") from None
        finally:
            client.close()
        if self.model_id not in served:
            raise RunnerError(f"{self.name}: the server at {safe_url(self.base_url)} does not serve "
                              f"{self.model_id!r}; it serves {served}")

    def open_client(self, api_key: str | None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=api_key or "EMPTY", base_url=self.base_url, max_retries=0,
                                  timeout=self.concurrency.timeout_s,
                                  http_client=openai.DefaultAsyncHttpxClient(event_hooks=event_hooks()))

    async def call(self, client: openai.AsyncOpenAI, request: Request) -> Response:
        kwargs = {k: v for k, v in self.settings_sent.items() if k in _CREATE_PARAMS}
        extra = {k: v for k, v in self.settings_sent.items() if k not in _CREATE_PARAMS}
        per_call = {} if request.seed is None else {"seed": request.seed}
        reply = await client.chat.completions.create(
            model=self.model_id, messages=to_messages(request.prompt), extra_body=extra or None, **per_call,
            **kwargs)
        if not reply.choices:
            raise RunnerError(f"the server returned no choices for {self.model_id!r}")
        choice = reply.choices[0]
        message_extra = choice.message.model_extra or {}
        reasoning = message_extra.get("reasoning_content") or message_extra.get("reasoning")
        text, thinking = split_thinking(choice.message.content or "", reasoning)
        usage = reply.usage
        counts = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
                  "total_tokens": usage.total_tokens} if usage else {}
        return self.response(text, thinking, counts, sent=per_call, finish_reason=choice.finish_reason,
                             response_model=reply.model, response_id=reply.id)
