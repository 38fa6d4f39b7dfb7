"""Shared helpers of the HF runner tests: the family table, tiny images and prompt builders."""

from __future__ import annotations

import io

from PIL import Image

from facet_probe.core.items import ImageRef
from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart
from facet_probe.runners.hf.blip2 import Blip2Runner
from facet_probe.runners.hf.gemma3 import Gemma3Runner
from facet_probe.runners.hf.idefics import IdeficsRunner
from facet_probe.runners.hf.internvl import InternVLRunner
from facet_probe.runners.hf.llava import LlavaRunner
from facet_probe.runners.hf.qwen import QwenRunner
from facet_probe_dev.testing.tiny_models import random_image

# family -> (adapter class, family keys); qwen3_5 with thinking off unless a test says otherwise
ADAPTERS = {
    "qwen3_5": (QwenRunner, {"thinking": False}),
    "qwen2_5_vl": (QwenRunner, {}),
    "internvl": (InternVLRunner, {}),
    "gemma3": (Gemma3Runner, {}),
    "llava": (LlavaRunner, {}),
    "idefics": (IdeficsRunner, {}),
    "blip2": (Blip2Runner, {"image_layout": "slot", "prompt_format": "minigpt4_vicuna0", "stop_text": "###"}),
    "instructblip": (Blip2Runner, {"image_layout": "slot"}),  # slot: the contract's prompts have several images
}
FAMILIES = list(ADAPTERS)


def image_ref(width: int, height: int, seed: int) -> ImageRef:
    return ImageRef.from_bytes(random_image(width, height, seed))


def pil(ref: ImageRef) -> Image.Image:
    return Image.open(io.BytesIO(ref.read_bytes())).convert("RGB")


def prompt_of(*parts, system: str = "Answer with the letter of the best option.") -> Prompt:
    """A one-turn prompt from strings (text parts) and ImageRefs (image parts), in the given order."""
    return Prompt(system=system, messages=(Message("user", tuple(
        ImagePart(p) if isinstance(p, ImageRef) else TextPart(p) for p in parts)),))
