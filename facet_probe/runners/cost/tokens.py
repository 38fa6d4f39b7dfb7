"""The tokens of one call, estimated before it is made: the rendered prompt's text and images by each
provider's formula, and the most a reply can bill (the model's max-tokens setting)."""

from __future__ import annotations

import io
import math

from PIL import Image

from facet_probe.core.prompts import ImagePart, Prompt
from facet_probe.runners.api.base import ApiRunner

#: The generation setting that caps a reply's tokens, per API (thinking included where the API counts it).
MAX_TOKENS_KEYS = {"responses.create": ("max_output_tokens",), "messages.create": ("max_tokens",),
                   "models.generate_content": ("max_output_tokens",),
                   "chat.completions.create": ("max_completion_tokens", "max_tokens")}


def text_tokens(text: str, chars_per_token: float) -> int:
    return math.ceil(len(text) / chars_per_token)


def image_tokens(provider: str, width: int, height: int, detail: str = "auto") -> int:
    """Input tokens of one image as each provider documents it (OpenAI 512-px tiles after fitting 2048 and
    768; Anthropic w*h/750 after fitting 1568, at most ~1600; Gemini 258 per 768-px tile, 258 when small)."""
    if provider.startswith("openai"):
        if detail == "low":
            return 85
        scale = min(1.0, 2048 / max(width, height))
        w, h = width * scale, height * scale
        scale = min(1.0, 768 / min(w, h))
        return 85 + 170 * math.ceil(w * scale / 512) * math.ceil(h * scale / 512)
    if provider == "anthropic":
        scale = min(1.0, 1568 / max(width, height))
        return min(1600, math.ceil(width * height * scale * scale / 750))
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def prompt_tokens(prompt: Prompt, provider: str, chars_per_token: float, detail: str = "auto") -> int:
    """Estimated input tokens of a rendered prompt (system, text parts, images, ~4 per message of framing)."""
    tokens = text_tokens(prompt.system or "", chars_per_token)
    for msg in prompt.messages:
        tokens += 4
        for part in msg.parts:
            if isinstance(part, ImagePart):
                with Image.open(io.BytesIO(part.image.read_bytes())) as img:
                    tokens += image_tokens(provider, *img.size, detail=detail)
            else:
                tokens += text_tokens(part.text, chars_per_token)
    return tokens


def max_output_tokens(runner: ApiRunner) -> int | None:
    """The most tokens one reply can bill: the API's max-tokens setting (plus Gemini's thinking budget)."""
    sent = runner.settings_sent
    cap = next((sent[k] for k in MAX_TOKENS_KEYS.get(runner.api, ()) if isinstance(sent.get(k), int)), None)
    if cap is not None and runner.api == "models.generate_content":
        cap += int((sent.get("thinking_config") or {}).get("thinking_budget") or 0)
    return cap
