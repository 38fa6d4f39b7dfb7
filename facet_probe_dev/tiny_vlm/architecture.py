"""The tiny VLM: a real transformers `LlavaForConditionalGeneration` with a tiny config.

A small CLIP vision tower (64x64 pictures in 16x16 patches, so one image costs 16 tokens), the
LLaVA two-layer GELU projector, and a small Llama language model over the project's own tokenizer
(`tokenizer.py`). Saved with `save_pretrained` next to a `LlavaProcessor` (library class, with the
PIL `CLIPImageProcessorPil`), so the HF runner and the attack suite load it like any hub LLaVA.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from transformers import (
    CLIPVisionConfig,
    GenerationConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PreTrainedTokenizerFast,
)
from transformers.models.clip import CLIPImageProcessorPil

from facet_probe_dev.tiny_vlm.tokenizer import CHAT_TEMPLATE, IMAGE_TOKEN

#: The synthetic pictures are drawn at this size (`image_size` of the synthetic loaders).
IMAGE_SIZE = 64


@dataclass(frozen=True)
class TinyVLMSpec:
    """The sizes of the tiny VLM (the defaults are the committed model's)."""

    image_size: int = IMAGE_SIZE
    patch_size: int = 16
    vision_hidden: int = 128
    vision_layers: int = 2
    vision_heads: int = 4
    text_hidden: int = 128
    text_layers: int = 4
    text_heads: int = 4
    text_kv_heads: int = 4
    text_intermediate: int = 384
    max_positions: int = 1024

    @property
    def image_tokens(self) -> int:
        """Tokens per image in the prompt (patches; the CLS feature is dropped)."""
        return (self.image_size // self.patch_size) ** 2

    def to_dict(self) -> dict:
        return asdict(self)


def build_config(spec: TinyVLMSpec, tokenizer: PreTrainedTokenizerFast) -> LlavaConfig:
    vision = CLIPVisionConfig(
        hidden_size=spec.vision_hidden, intermediate_size=4 * spec.vision_hidden,
        num_hidden_layers=spec.vision_layers, num_attention_heads=spec.vision_heads,
        image_size=spec.image_size, patch_size=spec.patch_size, projection_dim=spec.vision_hidden,
        hidden_act="gelu")
    text = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=spec.text_hidden, intermediate_size=spec.text_intermediate,
        num_hidden_layers=spec.text_layers, num_attention_heads=spec.text_heads,
        num_key_value_heads=spec.text_kv_heads, max_position_embeddings=spec.max_positions,
        rms_norm_eps=1e-5, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id)
    return LlavaConfig(
        vision_config=vision, text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        # the last vision layer (a 2-layer tower has nothing to spare), CLS dropped ("default")
        vision_feature_layer=-1, vision_feature_select_strategy="default",
        projector_hidden_act="gelu", tie_word_embeddings=True)


def build_model(spec: TinyVLMSpec, tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> LlavaForConditionalGeneration:
    """A freshly initialised tiny LLaVA (deterministic for a seed)."""
    torch.manual_seed(seed)
    config = build_config(spec, tokenizer)
    model = LlavaForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        do_sample=False, max_new_tokens=48, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)
    return model


def build_processor(spec: TinyVLMSpec, tokenizer: PreTrainedTokenizerFast) -> LlavaProcessor:
    """The library `LlavaProcessor` with the PIL CLIP image processor at the model's resolution."""
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": spec.image_size},
        crop_size={"height": spec.image_size, "width": spec.image_size})
    return LlavaProcessor(
        image_processor=image_processor, tokenizer=tokenizer, patch_size=spec.patch_size,
        vision_feature_select_strategy="default", num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE)


def logits_at(model: LlavaForConditionalGeneration, inputs: dict[str, torch.Tensor],
              keep: torch.Tensor) -> torch.Tensor:
    """The float32 logits (N, V) at the N positions where `keep` (B, T) is true: only the supervised
    positions (a sixth of a training batch) go through the vocabulary projection."""
    hidden = model.model(**inputs, use_cache=False)[0]
    return model.lm_head(hidden[keep]).float()


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["IMAGE_SIZE", "TinyVLMSpec", "build_config", "build_model", "build_processor", "count_parameters",
           "logits_at"]
