"""Which generation settings each API accepts, read from its SDK (the call method's signature, or Gemini's
config model), so a misspelt `model.generation.<key>` is refused before any call instead of reaching the API
unwarned in `extra_body`. Deliberate extras the SDK does not know (a server's own, e.g. vLLM's `top_k`) go in
`model.extra_body`."""

from __future__ import annotations

import inspect
from typing import Any

from hydra.utils import get_object

from facet_probe.runners.base import RunnerError

#: The SDK object that defines each API's settings (a method: its keyword arguments; a class: its fields).
SDK_SETTINGS = {
    "messages.create": "anthropic.resources.messages.AsyncMessages.create",
    "chat.completions.create": "openai.resources.chat.completions.completions.AsyncCompletions.create",
    "responses.create": "openai.resources.responses.responses.AsyncResponses.create",
    "models.generate_content": "google.genai.types.GenerateContentConfig",
}
#: Transport arguments of every SDK method: never generation settings.
TRANSPORT = {"self", "stream", "timeout", "extra_body", "extra_headers", "extra_query"}


def accepted_settings(api: str) -> set[str] | None:
    """The setting names the SDK takes for `api` (None: an API this module does not know, left unchecked)."""
    spec = SDK_SETTINGS.get(api)
    if spec is None:
        return None
    obj = get_object(spec)
    fields = getattr(obj, "model_fields", None)
    names = set(fields) if fields is not None else set(inspect.signature(obj).parameters)
    return names - TRANSPORT


def check_generation(model: str, api: str, sent: dict[str, Any]) -> None:
    """Refuse generation keys the SDK does not accept, naming the valid ones and the escape hatch."""
    accepted = accepted_settings(api)
    if accepted is None:
        return
    if unknown := sorted(set(sent) - accepted):
        keys = ", ".join(f"model.generation.{k}" for k in unknown)
        raise RunnerError(
            f"model {model}: {keys} is not a setting of the {api} API ({SDK_SETTINGS[api]}; valid: {', '.join(sorted(accepted))}); "
            "fix the spelling, or, to send a field the SDK does not know on purpose, put it in "
            f"model.extra_body (e.g. +model.extra_body.{unknown[0]}=<value>)")
