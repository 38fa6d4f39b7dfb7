"""rh_lab_chat: a lab's own text-only chat endpoint (OpenAI's Chat Completions wire format, its own key
variable), as an adapter on the provider's SDK: open the client, make one call, read the text and usage back."""

from __future__ import annotations

import openai

from facet_probe.core.prompts import ImagePart, TextPart
from facet_probe.runners.api.base import ApiRunner
from facet_probe.runners.base import Request, Response, RunnerError


class LabChatRunner(ApiRunner):
    provider = "lab_chat"
    api = "chat.completions.create"
    sdk_dist = "openai"
    key_envs = ("LAB_API_KEY",)

    def open_client(self, api_key: str | None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=api_key, base_url=self.base_url, max_retries=0,
                                  timeout=self.concurrency.timeout_s)

    async def call(self, client: openai.AsyncOpenAI, request: Request) -> Response:
        prompt = request.prompt
        if any(isinstance(p, ImagePart) for m in prompt.messages for p in m.parts):
            raise RunnerError(f"{self.name} reads text only; audit it on text facets and datasets")
        messages = [{"role": "system", "content": prompt.system}] if prompt.system else []
        messages += [{"role": m.role, "content": "\n\n".join(p.text for p in m.parts if isinstance(p, TextPart))}
                     for m in prompt.messages]
        reply = await client.chat.completions.create(model=self.model_id, messages=messages, **self.settings_sent)
        usage = reply.usage
        return self.response(reply.choices[0].message.content or "", None,
                             {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
                             if usage else {}, finish_reason=reply.choices[0].finish_reason,
                             response_model=reply.model)
