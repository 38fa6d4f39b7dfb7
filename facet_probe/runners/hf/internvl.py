"""InternVL3.5 adapter through the native transformers classes (`OpenGVLab/InternVL3_5-*-HF` checkpoints).

Images are tiled like the library's `InternVLProcessor` (448-px tiles up to `max_tiles` plus a thumbnail,
by `GotOcr2ImageProcessorPil`), normalised in torch; each image becomes `<img>` + 256 `<IMG_CONTEXT>` per
tile + `</img>`. Attacks use `max_tiles=1`: one tile per image, one (3, 448, 448) attack variable.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.processors import InternVLProcessor


class InternVLRunner(HFRunner):
    """InternVL3 / InternVL3.5 `-HF` checkpoints through `AutoModelForImageTextToText`."""

    family = "internvl"
    model_types = ("internvl",)  # the `-HF` checkpoints (the original ones are remote code, `internvl_chat`)
    image_placeholder = "<IMG_CONTEXT>"
    think_tags = ("<think>", "</think>")  # InternVL3.5's thinking mode (system prompt) writes <think>...</think>
    end_of_turn = "<|im_end|>"  # InternVL3.5-HF's ChatML template (its Qwen3 LM)
    prefills_shared_prefixes = True  # 1-D positions, one key/value cache per layer (prefix_reuse.py)

    def __init__(self, *, max_tiles: int | None = None, **kwargs: Any) -> None:
        """`max_tiles`: None = the checkpoint's max_patches (library default tiling); 1 = a single tile."""
        super().__init__(**kwargs)
        if max_tiles is not None and int(max_tiles) < 1:
            raise ValueError("max_tiles must be >= 1")
        self.max_tiles = max_tiles

    def _family_settings(self) -> dict[str, Any]:
        return {"max_tiles": self.max_tiles}

    @classmethod
    def attack_config_errors(cls, node: Any) -> list[str]:
        """Attacks need one tile per image: one (3, 448, 448) attack variable, not a tiling of it."""
        tiles = node.get("max_tiles")
        return [] if tiles == 1 else [f"an attack needs one InternVL tile per image; set model.max_tiles=1 "
                                      f"(now {tiles})"]

    def _context_hints(self) -> list[str]:
        return [f"model.max_tiles (now {self.processor.max_tiles} tiles + thumbnail per image, "
                f"{self.processor.image_seq_length} tokens each; 1 = one tile)"]

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoTokenizer
        from transformers.models.got_ocr2 import GotOcr2ImageProcessorPil

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        image_processor = GotOcr2ImageProcessorPil.from_pretrained(folder, **self.image_processor_kwargs)
        cfg = self.model.config
        size = cfg.vision_config.image_size
        patch = cfg.vision_config.patch_size
        side = (size[0] if isinstance(size, list | tuple) else size) // (patch[0] if isinstance(patch, list | tuple)
                                                                          else patch)
        seq = int(side * side * cfg.downsample_ratio**2)  # 256 for 448-px tiles, patch 14, ratio 0.5
        self.processor = InternVLProcessor(self.tokenizer, image_processor, seq, self.max_tiles)

    def prepare_image(self, image) -> torch.Tensor:
        """(3, H, W) for one tile, else (T, 3, H, W) tiles then thumbnail, in [0,1]."""
        return self.processor.tiles01(image)

    def image_tokens(self, image01: torch.Tensor) -> int:
        return self.processor.tokens_for(image01)

    def _tokenize(self, text: str, images: list):
        ids = self.processor.tokenize(text, images, add_special_tokens=self.add_special_tokens_for(text))
        return ids, {}, list(images)

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised tiles (sum of tiles, 3, H, W), images (and their tiles) in display order."""
        return {"pixel_values": self.to_model(self.processor.pixel_inputs(images01)["pixel_values"])}
