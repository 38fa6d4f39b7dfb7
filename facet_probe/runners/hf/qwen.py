"""Qwen-VL family adapter: Qwen3.5 (natively multimodal), Qwen3-VL and Qwen2.5-VL.

Images are resized once by the library's `Qwen2VLImageProcessorPil` (smart resize to multiples of
patch*merge) and patch-flattened in torch by our `QwenVLProcessor` (the library processor needs
torchvision). Qwen3.5 thinking is switched by the chat template's `enable_thinking` option; the trace
(`...</think>`) is split off into `Response.thinking`, and a longer token budget applies while thinking.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.processors import QwenVLProcessor


class QwenRunner(HFRunner):
    """Qwen3.5 / Qwen3-VL / Qwen2.5-VL through `AutoModelForImageTextToText`."""

    family = "qwen"
    model_types = ("qwen3_5", "qwen3_5_moe", "qwen3_vl", "qwen3_vl_moe", "qwen2_5_vl")
    image_placeholder = "<|image_pad|>"
    think_tags = ("<think>", "</think>")
    end_of_turn = "<|im_end|>"  # ChatML: every turn ends "<|im_end|>\n"

    def __init__(self, *, thinking: bool | None = False, thinking_max_new_tokens: int = 2048, **kwargs: Any) -> None:
        """`thinking`: True/False sets enable_thinking (off by default, as in the paper's panel; a template without
        the switch, Qwen2.5-VL's, ignores it); None leaves the template's default (Qwen3.5's thinks)."""
        super().__init__(**kwargs)
        self.thinking = thinking
        self.thinking_max_new_tokens = int(thinking_max_new_tokens)

    def chat_template_options(self) -> dict[str, Any]:
        return {} if self.thinking is None else {"enable_thinking": bool(self.thinking)}

    def effective_generation(self) -> dict[str, Any]:
        gen = dict(self.generation)
        if self.thinking:  # a kept reasoning trace needs room before the answer
            gen["max_new_tokens"] = max(int(gen["max_new_tokens"]), self.thinking_max_new_tokens)
        return gen

    def _family_settings(self) -> dict[str, Any]:
        return {"thinking": self.thinking}

    @classmethod
    def attack_config_errors(cls, node: Any) -> list[str]:
        """Attacks read the reply's own rationale: thinking must be off (a <think> trace is not the CoT)."""
        thinking = node.get("thinking")
        return [] if thinking is False else [f"an attack needs Qwen's thinking off (the rationale is the reply's "
                                             f"own CoT); set model.thinking=false (now {thinking})"]

    def _context_hints(self) -> list[str]:
        size = dict(self.processor.image_processor.size)
        return [f"model.image_processor_kwargs.size.longest_edge (the pixel budget per image, now {size})"]

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoTokenizer
        from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        image_processor = Qwen2VLImageProcessorPil.from_pretrained(folder, **self.image_processor_kwargs)
        self.processor = QwenVLProcessor(self.tokenizer, image_processor)

    def prepare_image(self, image) -> torch.Tensor:
        """(3, H, W) in [0,1], smart-resized to multiples of patch * merge."""
        return self.processor.resize01(image)

    def image_tokens(self, image01: torch.Tensor) -> int:
        return self.processor.tokens_for(image01)

    def _tokenize(self, text: str, images: list):
        ids, mm = self.processor.tokenize(text, images, add_special_tokens=self.add_special_tokens_for(text))
        return ids, {"mm_token_type_ids": mm}, list(images)

    def image_side_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """`image_grid_thw`: the forward's 3-D positions need each image's grid even when its features are given."""
        return {"image_grid_thw": torch.cat([self.processor.grid_thw(x) for x in images01]).to(self.input_device)}

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Flattened normalised patches (sum of gh*gw, 3*2*p*p) + image_grid_thw, images in display order."""
        out = self.processor.pixel_inputs(images01)
        return {"pixel_values": self.to_model(out["pixel_values"]),
                "image_grid_thw": out["image_grid_thw"].to(self.input_device)}
