"""Gemini through google-genai (`client.aio.models.generate_content`).

`generation` holds `GenerateContentConfig` fields as the SDK names them (temperature, top_p,
max_output_tokens, thinking_config: {thinking_budget, include_thoughts}); the per-request seed is sent as
`seed`. Thought parts (`part.thought`) become `Response.thinking`; thinking tokens are billed as output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic

from facet_probe.core.extras import optional
from facet_probe.core.prompts import ImagePart, Prompt
from facet_probe.runners.api.base import ApiRunner, image_mime
from facet_probe.runners.base import Request, Response, RunnerError

#: The SDK ([api] extra); None without it, when constructing the runner says what to install (ApiRunner).
if TYPE_CHECKING:
    from google import genai
    from google.genai import types
else:
    genai = optional("google.genai")
    types = optional("google.genai.types")


def to_contents(prompt: Prompt) -> list[types.Content]:
    """Prompt messages as Gemini contents, parts in display order (assistant turns have role "model")."""
    contents = []
    for msg in prompt.messages:
        parts = []
        for part in msg.parts:
            if isinstance(part, ImagePart):
                data = part.image.read_bytes()
                parts.append(types.Part.from_bytes(data=data, mime_type=image_mime(data)))
            else:
                parts.append(types.Part(text=part.text))
        contents.append(types.Content(role="user" if msg.role == "user" else "model", parts=parts))
    return contents


def usage_of(meta: types.GenerateContentResponseUsageMetadata | None) -> dict[str, int]:
    """Normalised usage: output_tokens = answer + thought tokens (both billed as output)."""
    if meta is None:
        return {}
    answer, thoughts = meta.candidates_token_count or 0, meta.thoughts_token_count or 0
    return {"input_tokens": meta.prompt_token_count or 0, "output_tokens": answer + thoughts,
            "thinking_tokens": thoughts, "cached_input_tokens": meta.cached_content_token_count or 0,
            "total_tokens": meta.total_token_count or 0}


class GeminiRunner(ApiRunner):
    provider = "gemini"
    api = "models.generate_content"
    sdk_dist = "google-genai"
    sdk_module = "google.genai"
    key_envs = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
    key_header = "x-goog-api-key"

    def validate_settings(self) -> None:
        per_call = {"seed", "system_instruction"} & set(self.generation)
        if per_call:
            raise RunnerError(f"model config {self.name}: {sorted(per_call)} are set per call (from the "
                              "request and the prompt); remove them from `generation`")
        try:
            types.GenerateContentConfig(**self.settings_sent)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            raise RunnerError(f"model config {self.name}: generation settings are not valid "
                              f"GenerateContentConfig fields: {first['loc']} {first['msg']}") from None

    def open_client(self, api_key: str | None) -> genai.Client:
        options = types.HttpOptions(base_url=self.base_url, api_version="v1beta",
                                    timeout=int(self.concurrency.timeout_s * 1000),
                                    retry_options=types.HttpRetryOptions(attempts=1))  # the engine retries
        return genai.Client(api_key=api_key, vertexai=False, http_options=options)

    async def close_client(self, client: genai.Client) -> None:
        await client.aio.aclose()
        client.close()

    async def call(self, client: genai.Client, request: Request) -> Response:
        prompt = request.prompt
        per_call: dict[str, Any] = {} if request.seed is None else {"seed": request.seed}
        config = types.GenerateContentConfig(**self.settings_sent, **per_call,
                                             system_instruction=prompt.system or None)
        reply = await client.aio.models.generate_content(model=self.model_id, contents=to_contents(prompt),
                                                         config=config)
        text, thinking, finish = "", "", None
        if reply.candidates:
            cand = reply.candidates[0]
            finish = str(cand.finish_reason.value) if cand.finish_reason else None
            for part in (cand.content.parts if cand.content and cand.content.parts else []):
                if part.thought:
                    thinking += part.text or ""
                elif part.text:
                    text += part.text
        feedback = reply.prompt_feedback
        blocked = str(feedback.block_reason.value) if feedback and feedback.block_reason else None
        return self.response(text, thinking, usage_of(reply.usage_metadata), sent=per_call,
                             finish_reason=finish, block_reason=blocked, response_model=reply.model_version,
                             response_id=reply.response_id)
