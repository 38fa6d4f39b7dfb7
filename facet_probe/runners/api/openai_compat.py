"""Self-hosted OpenAI-compatible servers (vLLM, SGLang, TGI, llama.cpp) through Chat Completions.

`model=openai_compat model.base_url=http://host:port/v1 model.model_id=<served name>`. The key comes from
`api_key_env` (default OPENAI_API_KEY) or, when unset, the server is called keyless. `generation` holds Chat
Completions fields; settings the SDK has no argument for (vLLM's top_k, repetition_penalty, ...) go in
`extra_body`. The request's seed is sent. Thinking is read from `reasoning_content` / `reasoning` (vLLM's
reasoning parsers) or from a leading `<think>...</think>` block in the text.

For vLLM (`model=vllm_server`, docs/hf_models.md for the `vllm serve` command of each config): `thinking`
true/false sends `chat_template_kwargs.enable_thinking` (Qwen3.5's switch, as the HF runner's `thinking`),
and while thinking `max_tokens` is at least `thinking_max_tokens` (the paper: 512, 2048 with kept traces).
`check_ready` records what `/v1/models` says is served (its id, `root` — the checkpoint path or hub id —,
`max_model_len`, and the commit when `root` is a hub snapshot folder) in every response's provenance.
"""

from __future__ import annotations

import base64
import inspect
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from facet_probe.core.extras import optional
from facet_probe.core.prompts import ImagePart, Prompt, TextPart
from facet_probe.runners.api.base import ApiRunner, image_mime, safe_url
from facet_probe.runners.api.ratelimit import event_hooks
from facet_probe.runners.base import Request, Response, RunnerError

#: The SDK ([api] extra); None without it, when constructing the runner says what to install (ApiRunner).
if TYPE_CHECKING:
    import openai
else:
    openai = optional("openai")


@cache
def create_params() -> frozenset[str]:
    """The keyword arguments `chat.completions.create` takes (the rest of `generation` goes in `extra_body`)."""
    from openai.resources.chat.completions.completions import AsyncCompletions  # noqa: PLC0415

    return frozenset(inspect.signature(AsyncCompletions.create).parameters) - {
        "self", "model", "messages", "seed", "stream", "timeout", "extra_body", "extra_headers", "extra_query"}
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.S)


def to_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """System text plus chat messages, parts in display order (images as data URLs)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}] if prompt.system else []
    for msg in prompt.messages:
        content: list[dict[str, Any]] = []
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


def served_record(card) -> dict[str, Any]:
    """What a `/v1/models` entry says about the weights: id, `root` (vLLM: the path or hub id it loaded),
    `max_model_len`, and `revision`, the commit of a hub snapshot `root` (`.../snapshots/<sha>`)."""
    extra = card.model_extra or {}
    root = extra.get("root")
    parts = str(root or "").rstrip("/").split("/")
    commit = parts[-1] if len(parts) > 1 and parts[-2] == "snapshots" and len(parts[-1]) == 40 else None
    return {k: v for k, v in {"id": card.id, "root": root, "max_model_len": extra.get("max_model_len"),
                              "owned_by": card.owned_by, "revision": commit}.items() if v is not None}


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
    sdk_module = "openai"
    key_envs = ("OPENAI_API_KEY",)
    key_required = False

    def __init__(self, *, api_key_env: str = "OPENAI_API_KEY", verify_model: bool = True,
                 thinking: bool | None = None, thinking_max_tokens: int = 2048, **kwargs: Any) -> None:
        self.key_envs = (api_key_env,)
        self.verify_model = verify_model
        self.thinking = thinking
        self.thinking_max_tokens = int(thinking_max_tokens)
        self.served: dict[str, Any] = {}  # what /v1/models says about model_id (check_ready)
        super().__init__(**kwargs)
        if thinking is not None:  # sent, so in the fingerprint: thinking on and off are other calls
            kwargs_sent = dict(self.settings_sent.get("chat_template_kwargs") or {})
            self.settings_sent["chat_template_kwargs"] = {**kwargs_sent, "enable_thinking": bool(thinking)}
            if thinking and "max_tokens" in self.settings_sent:
                self.settings_sent["max_tokens"] = max(int(self.settings_sent["max_tokens"]), self.thinking_max_tokens)

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
            cards = list(client.models.list())
        except Exception as exc:
            why = f"{type(exc).__name__}: {self.scrub(str(exc))[:200]}"
            raise RunnerError(f"{self.name}: cannot list models at {safe_url(self.base_url)} ({why}); "
                              "is the server up?") from None
        finally:
            client.close()
        served = [m.id for m in cards]
        if self.model_id not in served:
            raise RunnerError(f"{self.name}: the server at {safe_url(self.base_url)} does not serve "
                              f"{self.model_id!r}; it serves {served}")
        self.served = served_record(next(m for m in cards if m.id == self.model_id))

    def open_client(self, api_key: str | None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=api_key or "EMPTY", base_url=self.base_url, max_retries=0,
                                  timeout=self.concurrency.timeout_s,
                                  http_client=openai.DefaultAsyncHttpxClient(event_hooks=event_hooks()))

    async def call(self, client: openai.AsyncOpenAI, request: Request) -> Response:
        kwargs = {k: v for k, v in self.settings_sent.items() if k in create_params()}
        extra = {k: v for k, v in self.settings_sent.items() if k not in create_params()}
        per_call = {} if request.seed is None else {"seed": request.seed}
        reply = await client.chat.completions.create(  # type: ignore[call-overload]  # the SDK types requests as TypedDicts: ours are plain dicts of their shape
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
                             response_model=reply.model, response_id=reply.id, served=self.served or None)
