"""LLaVA adapter: LLaVA-1.5 (`llava-hf/llava-1.5-7b-hf`) and any LLaVA-style folder, e.g. the project's tiny VLM.

Each image is resized / cropped once by the folder's PIL image processor and normalised in torch; each
`<image>` is expanded into the vision tower's patch tokens by the rule of the library `LlavaProcessor` (built
from the folder's tokenizer, its image processor and the model config; its own image pass is not run).
llava-hf's own chat template renders all of a message's images before its text, which would move images away
from their displayed slots, so such a template is replaced by LLaVA-1.5's conversation format
("USER: ... ASSISTANT:") with images kept in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.processors import normalize, resize01_with, tokenize_expanded

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
    prefills_shared_prefixes = True  # 1-D positions, one key/value cache per layer (prefix_reuse.py)

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

    def prepare_image(self, image) -> torch.Tensor:
        """(3, S, S) in [0,1]: the image processor's resize and crop."""
        return resize01_with(self.processor.image_processor, image)[0]

    def image_tokens(self, image01: torch.Tensor) -> int:
        """Patch tokens of one resized image (+ CLS unless the strategy drops it), as `LlavaProcessor` counts them."""
        p = self.processor
        h, w = image01.shape[-2:]
        n = (h // p.patch_size) * (w // p.patch_size) + p.num_additional_image_tokens
        return n - 1 if p.vision_feature_select_strategy == "default" else n

    def _tokenize(self, text: str, images: list):
        token = self.processor.image_token
        counts = [self.image_tokens(x) for x in images]
        ids = tokenize_expanded(self.tokenizer, text, token, [token * n for n in counts], self.processor.image_token_id,
                                sum(counts), add_special_tokens=self.add_special_tokens_for(text))
        return ids, {}, list(images)

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised images (n, 3, S, S) in display order."""
        return {"pixel_values": self.to_model(torch.stack([normalize(x, self._mean, self._std) for x in images01]))}
