"""Helpers for the API runner tests: fake keys, images, prompts, runners built from the shipped configs."""

from __future__ import annotations

import io
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf
from PIL import Image

from facet_probe.core.items import ImageRef
from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart

MODEL_CONF = Path(__file__).resolve().parents[3] / "facet_probe" / "conf" / "model"

KEYS = {
    "GOOGLE_API_KEY": "g-test-key-0123456789",
    "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
    "OPENAI_API_KEY": "sk-openai-test-key-0123456789",
}


def png(color: str, size: int = 4) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, "PNG")
    return buf.getvalue()


def jpeg(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(buf, "JPEG")
    return buf.getvalue()


def three_images() -> list[ImageRef]:
    """Three distinguishable images: PNG red, JPEG green, PNG blue."""
    return [
        ImageRef.from_bytes(png("red")),
        ImageRef.from_bytes(jpeg("green")),
        ImageRef.from_bytes(png("blue")),
    ]


def interleaved_prompt(images: list[ImageRef], tag: str = "") -> Prompt:
    """System text, then a user turn with text and images interleaved (blue, red, green order)."""
    red, green, blue = images
    parts = (
        TextPart(f"Evidence {tag}:"),
        ImagePart(blue),
        TextPart("then"),
        ImagePart(red),
        ImagePart(green),
        TextPart(f"Which colour came first? {tag}"),
    )
    return Prompt(system="Answer with one word.", messages=(Message("user", parts),))


def text_prompt(tag: str) -> Prompt:
    return Prompt(system="", messages=(Message("user", (TextPart(f"Question {tag}?"),)),))


def make_runner(config: str, base_url: str, **overrides):
    """Instantiate a shipped model config (conf/model/<config>.yaml) pointed at `base_url`."""
    cfg = OmegaConf.load(MODEL_CONF / f"{config}.yaml")
    cfg.base_url = base_url
    if config == "openai_compat":
        cfg.model_id = "served-model"
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value, merge=True)
    return instantiate(cfg)


def url_for(config: str, server_url: str) -> str:
    """OpenAI SDKs want the /v1 root; Gemini and Anthropic want the host root."""
    return server_url + "/v1" if config.startswith(("gpt", "openai")) else server_url


FAST = {
    "concurrency.backoff_base_s": 0.01,
    "concurrency.backoff_max_s": 0.05,
    "concurrency.timeout_s": 2.0,
    "concurrency.max_retries": 10,
    "concurrency.initial": 4,
    "verify_model": False,
}


def fast(config: str, **overrides) -> dict:
    """Test-speed retry settings (verify_model only exists for openai_compat), plus `overrides`."""
    return {
        **{k: v for k, v in FAST.items() if k != "verify_model" or config == "openai_compat"},
        **overrides,
    }
