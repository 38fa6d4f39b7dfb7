"""Gemma3 adapter (MedGemma 4B-IT / 27B-IT), with the token ids the library `Gemma3Processor` makes.

Each image is resized once to the processor's square resolution (896 px for MedGemma; pan-and-scan
off) and normalised in torch; each `<start_of_image>` is expanded into the processor's 256 soft-token block
(its `full_image_sequence`; its own image pass is not run), and `token_type_ids` mark the soft tokens, which
Gemma3 attends to bidirectionally inside an image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.processors import normalize, resize01_with, tokenize_expanded


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

    def prepare_image(self, image) -> torch.Tensor:
        """(3, S, S) in [0,1]: the image processor's resize, pan-and-scan off."""
        return resize01_with(self.processor.image_processor, image, do_pan_and_scan=False)[0]

    def image_tokens(self, image01: torch.Tensor) -> int:
        return int(self.processor.image_seq_length)

    def _tokenize(self, text: str, images: list):
        p = self.processor
        soft = self.tokenizer.image_token_id
        ids = tokenize_expanded(self.tokenizer, text, p.boi_token, [p.full_image_sequence] * len(images), soft,
                                sum(self.image_tokens(x) for x in images),
                                add_special_tokens=self.add_special_tokens_for(text))
        return ids, {"token_type_ids": (ids == soft).long()}, list(images)

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised images (n, 3, S, S) in display order."""
        return {"pixel_values": self.to_model(torch.stack([normalize(x, self._mean, self._std) for x in images01]))}
