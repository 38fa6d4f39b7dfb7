"""Gemma3 adapter (MedGemma 4B-IT / 27B-IT): the library `Gemma3Processor` builds the token ids.

Each image is resized once to the processor's square resolution (896 px for MedGemma; pan-and-scan
off) and normalised in torch; the processor expands `<start_of_image>` into the 256 soft-token block
and returns the `token_type_ids` Gemma3 uses for bidirectional attention inside an image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.processors import normalize, resize01_with


class Gemma3Runner(HFRunner):
    """Gemma3 / MedGemma through `AutoModelForImageTextToText`."""

    family = "gemma3"
    model_types = ("gemma3",)
    image_placeholder = "<start_of_image>"
    end_of_turn = "<end_of_turn>"  # "<start_of_turn>model\nreply<end_of_turn>\n" (not the <eos> listed first)

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoImageProcessor, AutoTokenizer, Gemma3Processor

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        ip = AutoImageProcessor.from_pretrained(folder, backend="pil", **self.image_processor_kwargs)
        self.processor = Gemma3Processor(image_processor=ip, tokenizer=self.tokenizer,
                                         image_seq_length=self.model.config.mm_tokens_per_image)
        self._mean, self._std = list(ip.image_mean), list(ip.image_std)

    def _tokenize(self, text: str, images: list):
        ip = self.processor.image_processor
        images01 = [resize01_with(ip, im, do_pan_and_scan=False)[0] for im in images]
        enc = self.processor(text=[text], images=[images] if images else None, do_pan_and_scan=False,
                             add_special_tokens=self.add_special_tokens_for(text), return_tensors="pt")
        fields = {"token_type_ids": enc["token_type_ids"][0]} if "token_type_ids" in enc else {}
        return enc["input_ids"][0], fields, images01

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised images (n, 3, S, S) in display order."""
        return {"pixel_values": self.to_model(torch.stack([normalize(x, self._mean, self._std) for x in images01]))}
