"""LLaVA adapter: LLaVA-1.5 (`llava-hf/llava-1.5-7b-hf`) and any LLaVA-style folder, e.g. the project's tiny VLM.

The library `LlavaProcessor` (built from the folder's tokenizer, its PIL image processor and the model
config) expands each `<image>` into the vision tower's patch tokens; images are resized / cropped once by
the image processor and normalised in torch. llava-hf's own chat template renders all of a message's
images before its text, which would move images away from their displayed slots, so such a template is
replaced by LLaVA-1.5's conversation format ("USER: ... ASSISTANT:") with images kept in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.processors import normalize, resize01_with

# LLaVA-1.5's "vicuna_v1" conversation: "<s>SYSTEM USER: ... ASSISTANT: reply</s>USER: ... ASSISTANT:",
# with every <image> at its slot inside the turn.
LLAVA15_TEMPLATE = (
    "{{ bos_token }}{%- for m in messages -%}"
    "{%- if m['role'] == 'system' -%}{{ m['content'] + ' ' }}"
    "{%- else -%}{{ 'USER: ' if m['role'] == 'user' else 'ASSISTANT: ' }}"
    "{%- if m['content'] is string -%}{{ m['content'] }}{%- else -%}{%- for c in m['content'] -%}"
    "{%- if c['type'] == 'image' -%}{{ '<image>\n' }}{%- elif c['type'] == 'text' -%}{{ c['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{{ eos_token if m['role'] == 'assistant' else ' ' }}"
    "{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}ASSISTANT:{%- endif -%}"
)


class LlavaRunner(HFRunner):
    """LLaVA-1.5 and LLaVA-style checkpoints (CLIP-like tower + projector + Llama-like LM)."""

    family = "llava"
    model_types = ("llava",)
    image_placeholder = "<image>"
    end_of_turn = "</s>"  # vicuna_v1: "ASSISTANT: reply</s>" (LLAVA15_TEMPLATE)

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoImageProcessor, AutoTokenizer, LlavaProcessor

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        ip = AutoImageProcessor.from_pretrained(folder, backend="pil", **self.image_processor_kwargs)
        cfg = self.model.config
        vision_type = getattr(cfg.vision_config, "model_type", "")
        self.processor = LlavaProcessor(
            image_processor=ip, tokenizer=self.tokenizer, patch_size=cfg.vision_config.patch_size,
            vision_feature_select_strategy=cfg.vision_feature_select_strategy,
            num_additional_image_tokens=1 if "clip" in vision_type else 0,  # CLIP's class token
            image_token=getattr(self.tokenizer, "image_token", None) or "<image>")
        self._mean, self._std = list(ip.image_mean), list(ip.image_std)

    def _fallback_template(self) -> str:
        return LLAVA15_TEMPLATE

    def _tokenize(self, text: str, images: list):
        ip = self.processor.image_processor
        images01 = [resize01_with(ip, im)[0] for im in images]
        enc = self.processor(text=[text], images=images or None,
                             add_special_tokens=self.add_special_tokens_for(text), return_tensors="pt")
        return enc["input_ids"][0], {}, images01

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised images (n, 3, S, S) in display order."""
        return {"pixel_values": self.to_model(torch.stack([normalize(x, self._mean, self._std) for x in images01]))}
