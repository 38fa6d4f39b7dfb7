"""Tiny random vision-language models of each HF family, built offline and saved like hub checkpoints.

Each builder trains a byte-level BPE tokenizer on the spot, builds the family's config with two text
layers (hidden 64) and a one- or two-layer vision tower, and `save_pretrained`s model, tokenizer (with a
chat template in the family's format), image processor and generation config to a folder. Tests,
benchmarks and the attack suite load these folders through the real adapters via `local_path`.
Nothing is downloaded. Random weights: outputs are gibberish, but every code path is the real one.
"""

from __future__ import annotations

import io
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from facet_probe_dev.testing.tiny_blip2 import (  # imports this one lazily
    build_blip2,
    build_instructblip,
    build_minigpt4,
)
from facet_probe_dev.testing.tiny_idefics import build_idefics  # its own module (imports this one lazily)

FAMILIES = ("qwen3_5", "qwen2_5_vl", "internvl", "gemma3", "llava")

_WORDS = (
    "the", "a", "an", "image", "picture", "photo", "shows", "cat", "dog", "red", "blue", "green", "answer",
    "option", "is", "which", "of", "following", "A", "B", "C", "D", "E", "yes", "no", "document",
    "evidence", "chunk", "order", "first", "second", "third", "question", "context", "select", "best",
    "The", "answer", "is", "(", ")", ".", ":", "Answer", "Options", "Question", "think", "reasoning",
    "because", "so", "therefore",
)

# --- chat templates in each family's format (images at their slots, in message order) -------------------

_CONTENT = (
    "{%- if m['content'] is string -%}{{ m['content'] }}"
    "{%- else -%}{%- for c in m['content'] -%}"
    "{%- if c['type'] == 'image' -%}IMAGE"
    "{%- elif c['type'] == 'text' -%}{{ c['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
)


def _chatml(image_markup: str, thinking: bool) -> str:
    """A ChatML template (Qwen / InternVL); with `thinking`, Qwen3.5's enable_thinking switch."""
    gen = "<|im_start|>assistant\n"
    if thinking:
        gen += ("{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
                "{% else %}<think>\n{% endif %}")
    return ("{%- for m in messages -%}<|im_start|>{{ m['role'] }}\n" + _CONTENT.replace("IMAGE", image_markup)
            + "<|im_end|>\n{%- endfor -%}{%- if add_generation_prompt -%}" + gen + "{%- endif -%}")


QWEN35_TEMPLATE = _chatml("<|vision_start|><|image_pad|><|vision_end|>", thinking=True)
QWEN25_TEMPLATE = _chatml("<|vision_start|><|image_pad|><|vision_end|>", thinking=False)
INTERNVL_TEMPLATE = _chatml("<IMG_CONTEXT>\n", thinking=False)

GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}{%- set prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set turns = messages[1:] -%}{%- else -%}{%- set prefix = '' -%}{%- set turns = messages -%}{%- endif -%}"
    "{%- for m in turns -%}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ prefix if loop.first else '' }}" + _CONTENT.replace("IMAGE", "<start_of_image>") + "<end_of_turn>\n"
    "{%- endfor -%}{%- if add_generation_prompt -%}<start_of_turn>model\n{%- endif -%}"
)

# The llava-hf/llava-1.5 checkpoint template, which renders all of a message's images before its text.
LLAVA_HF_TEMPLATE = (
    "{%- for m in messages -%}{%- if m['role'] != 'system' -%}{{ m['role'].upper() + ': ' }}{%- endif -%}"
    "{%- for c in m['content'] | selectattr('type', 'equalto', 'image') -%}{{ '<image>\n' }}{%- endfor -%}"
    "{%- for c in m['content'] | selectattr('type', 'equalto', 'text') -%}{{ c['text'] + ' ' }}{%- endfor -%}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{ 'ASSISTANT:' }}{%- endif -%}"
)


def _tokenizer(specials: list[str], *, eos: str, pad: str, template: str, bos: str | None = None,
               named: dict[str, str] | None = None, plain: tuple[str, ...] = (), seed: int = 0):
    """A byte-level BPE tokenizer trained in well under a second on a synthetic corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(_WORDS) for _ in range(12)) for _ in range(2000)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    if bos is not None:  # like Llama / Gemma: the tokenizer itself prepends BOS
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    kwargs = {"eos_token": eos, "pad_token": pad, "extra_special_tokens": named or None}
    if bos is not None:
        kwargs["bos_token"] = bos
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    if plain:  # e.g. <think> / </think>: added tokens that decoding keeps (not special)
        fast.add_tokens(list(plain))
    fast.chat_template = template
    return fast


def _save(model, tokenizer, out: Path, *, image_processor=None, processor=None, eos_ids: list[int]) -> Path:
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(eos_token_id=eos_ids, pad_token_id=tokenizer.pad_token_id,
                                               bos_token_id=tokenizer.bos_token_id)
    model.save_pretrained(out)
    if processor is not None:
        processor.save_pretrained(out)
    else:
        tokenizer.save_pretrained(out)
        image_processor.save_pretrained(out)
    return out


_QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]


def _qwen_ids(tok) -> dict[str, int]:
    ids = {t: tok.convert_tokens_to_ids(t) for t in _QWEN_SPECIALS}
    return dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])


def build_qwen3_5(out: Path) -> Path:
    """Qwen3.5: hybrid Gated-DeltaNet / full-attention text model, patch 16, thinking template."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    tok = _tokenizer(_QWEN_SPECIALS, eos="<|im_end|>", pad="<|endoftext|>", template=QWEN35_TEMPLATE,
                     plain=("<think>", "</think>"))
    cfg = Qwen3_5Config(
        text_config=dict(
            vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_key_head_dim=16,
            linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=2,
            layer_types=["linear_attention", "full_attention"],
            # head_dim 32 * partial_rotary 0.25 = 8 rotary dims -> mrope sections sum to 4
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1],
                             "mrope_interleaved": True, "partial_rotary_factor": 0.25},
            max_position_embeddings=1024, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
            tie_word_embeddings=False),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           num_position_embeddings=64),
        **_qwen_ids(tok))
    model = Qwen3_5ForConditionalGeneration(cfg).eval()
    improc = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                      size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64},
                                      image_mean=[0.5] * 3, image_std=[0.5] * 3)
    return _save(model, tok, out, image_processor=improc, eos_ids=[tok.eos_token_id])


def build_qwen2_5_vl(out: Path) -> Path:
    """Qwen2.5-VL: windowed-attention vision tower, patch 14, no thinking."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    tok = _tokenizer(_QWEN_SPECIALS, eos="<|im_end|>", pad="<|endoftext|>", template=QWEN25_TEMPLATE)
    cfg = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 4, 4]},
            pad_token_id=tok.pad_token_id, bos_token_id=None, eos_token_id=tok.eos_token_id),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, window_size=56, out_hidden_size=64,
                           fullatt_block_indexes=[1]),
        **_qwen_ids(tok))
    model = Qwen2_5_VLForConditionalGeneration(cfg).eval()
    improc = Qwen2VLImageProcessorPil(patch_size=14, temporal_patch_size=2, merge_size=2,
                                      size={"shortest_edge": 28 * 28, "longest_edge": 56 * 56})
    return _save(model, tok, out, image_processor=improc, eos_ids=[tok.eos_token_id])


def build_internvl(out: Path) -> Path:
    """InternVL (native `-HF` classes): 32 px tiles of 4 tokens each, up to 4 tiles + thumbnail."""
    from transformers import InternVLConfig, InternVLForConditionalGeneration
    from transformers.models.got_ocr2 import GotOcr2ImageProcessorPil

    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
             "video_token": "<video>"}
    tok = _tokenizer(_QWEN_SPECIALS + list(named.values()), eos="<|im_end|>", pad="<|endoftext|>",
                     template=INTERNVL_TEMPLATE, named=named, plain=("<think>", "</think>"))
    cfg = InternVLConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=[32, 32], patch_size=[8, 8]),
        text_config=dict(model_type="qwen2", vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=1024, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id),
        image_token_id=tok.convert_tokens_to_ids("<IMG_CONTEXT>"), downsample_ratio=0.5)
    model = InternVLForConditionalGeneration(cfg).eval()
    improc = GotOcr2ImageProcessorPil(size={"height": 32, "width": 32}, max_patches=4,
                                      image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
    return _save(model, tok, out, image_processor=improc, eos_ids=[tok.eos_token_id])


def build_gemma3(out: Path) -> Path:
    """Gemma3 (MedGemma): SigLIP tower pooled to 4 soft tokens per 32 px image; projection re-initialised."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor
    from transformers.models.gemma3 import Gemma3ImageProcessorPil

    named = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", *named.values(), "<start_of_turn>", "<end_of_turn>"]
    tok = _tokenizer(specials, eos="<eos>", pad="<pad>", bos="<bos>", template=GEMMA3_TEMPLATE, named=named)
    cfg = Gemma3Config(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=16,
                         layer_types=["sliding_attention", "full_attention"],  # one global layer, like 5:1
                         max_position_embeddings=1024, pad_token_id=tok.pad_token_id,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        mm_tokens_per_image=4, image_token_index=tok.convert_tokens_to_ids("<image_soft_token>"),
        boi_token_index=tok.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_index=tok.convert_tokens_to_ids("<end_of_image>"))
    model = Gemma3ForConditionalGeneration(cfg).eval()
    # A fresh Gemma3 zero-initialises this projection: image features (and pixel gradients) would be 0.
    torch.nn.init.normal_(model.model.multi_modal_projector.mm_input_projection_weight, std=0.5)
    improc = Gemma3ImageProcessorPil(size={"height": 32, "width": 32}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    proc = Gemma3Processor(image_processor=improc, tokenizer=tok, image_seq_length=4, chat_template=GEMMA3_TEMPLATE)
    eos = [tok.eos_token_id, tok.convert_tokens_to_ids("<end_of_turn>")]
    return _save(model, tok, out, processor=proc, eos_ids=eos)


def build_llava(out: Path, *, chat_template: str = LLAVA_HF_TEMPLATE) -> Path:
    """LLaVA-1.5: CLIP tower (32 px, patch 8 -> 16 tokens) + MLP projector + Llama; llava-hf's template.

    The project's own tiny VLM has this shape too; pass its order-preserving `chat_template`.
    """
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )
    from transformers.models.clip import CLIPImageProcessorPil

    tok = _tokenizer(["<unk>", "<s>", "</s>", "<pad>", "<image>"], eos="</s>", pad="<pad>", bos="<s>",
                     template=chat_template, named={"image_token": "<image>"})
    # every linear layer has in_features % 64 == 0: bitsandbytes' CPU NF4 kernels need whole 64-blocks
    vision = CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=64)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
                      vision_feature_layer=-2, vision_feature_select_strategy="default", projector_hidden_act="gelu")
    model = LlavaForConditionalGeneration(cfg).eval()
    improc = CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    proc = LlavaProcessor(image_processor=improc, tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                          num_additional_image_tokens=1, chat_template=chat_template)
    return _save(model, tok, out, processor=proc, eos_ids=[tok.eos_token_id])


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "qwen3_5": build_qwen3_5, "qwen2_5_vl": build_qwen2_5_vl, "internvl": build_internvl,
    "gemma3": build_gemma3, "llava": build_llava,
    "idefics": build_idefics,
    "blip2": build_blip2, "instructblip": build_instructblip, "minigpt4": build_minigpt4,
}


def build_tiny_model(family: str, out: str | Path, seed: int = 0) -> Path:
    """Build the tiny `family` model with weights drawn from `seed` and save it to `out`."""
    if family not in BUILDERS:
        raise ValueError(f"unknown tiny family {family!r}; choose from {sorted(BUILDERS)}")
    torch.manual_seed(seed)
    return BUILDERS[family](Path(out))


def built_once(out: str | Path, build: Callable[[Path], object], done: str = "config.json",
               in_place: bool = False) -> Path:
    """The folder `out`, made by `build(folder)` unless it holds `done` already. Processes sharing `out` (the
    test run's xdist workers) build it once: under a file lock beside it, into a temporary folder renamed
    into place when complete, so that no one ever reads a half-built folder. `in_place`: for a folder that cannot
    move once built (its files record their own paths), `build(out)` itself, which writes `done` last."""
    from filelock import FileLock  # installed with huggingface_hub

    out = Path(out)
    if (out / done).is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{out}.lock"):
        if (out / done).is_file():  # another process built it while this one waited
            return out
        if in_place:  # a killed build's leftovers are the build's to replace
            build(out)
            return out
        building = out.with_name(f"{out.name}.building")
        shutil.rmtree(building, ignore_errors=True)  # left by a killed build
        build(building)
        shutil.rmtree(out, ignore_errors=True)  # a half-built folder of an older, unlocked build
        building.rename(out)
    return out


def tiny_model_path(family: str, root: str | Path, seed: int = 0) -> Path:
    """The folder of the tiny `family` model under `root`, built on first use (reused afterwards; built once
    where processes share `root`: `built_once`)."""
    return built_once(Path(root) / f"{family}-seed{seed}", lambda folder: build_tiny_model(family, folder, seed))


def retrain_in_place(folder: str | Path) -> Path:
    """Change a saved LLaVA folder's weights where they are, as `make tiny-vlm` would (the output projection
    scaled by 1.5): the same path and config, other weights."""
    from transformers import LlavaForConditionalGeneration

    model = LlavaForConditionalGeneration.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.mul_(1.5)
    model.save_pretrained(folder)
    return Path(folder)


def random_image(width: int, height: int, seed: int) -> bytes:
    """PNG bytes of a uniform-noise RGB image (distinct per seed)."""
    from PIL import Image

    arr = (np.random.RandomState(seed).rand(height, width, 3) * 255).astype("uint8")
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


#: questions of varied length for `image_requests`
QUESTIONS = ["Which animal is red?", "Which option matches the evidence in the document?",
             "Is the second chunk relevant to the question, yes or no?", "Select the best answer."]


def image_requests(n: int) -> list:
    """`n` one-image requests of varied prompt lengths and image sizes (the batching benchmark's and gpu-check's)."""
    from facet_probe.core.items import ImageRef
    from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart
    from facet_probe.runners.base import Request

    out = []
    for i in range(n):
        image = ImageRef.from_bytes(random_image(32 + 8 * (i % 4), 32 + 4 * (i % 3), seed=i))
        text = QUESTIONS[i % len(QUESTIONS)] + " A cat B dog C bird D fish" * (1 + i % 3)
        prompt = Prompt(system="Answer with the letter.", messages=(Message("user", (
            TextPart("Look at the picture."), ImagePart(image), TextPart(text))),))
        out.append(Request(key=f"t{i}", prompt=prompt))
    return out
