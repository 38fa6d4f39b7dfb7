"""BLIP-2 family adapter: `Blip2ForConditionalGeneration` (MiniGPT-4's shape) and `InstructBlipForConditionalGeneration`.

An image becomes `num_query_tokens` Q-Former outputs projected into the LLM (32 for the real checkpoints). Images
are resized once by the checkpoint's BLIP image processor (224 px, bicubic) and normalised in torch, so the pixel
gradient flows; InstructBLIP's Q-Former also reads the instruction (its own BERT tokenizer, `qformer_tokenizer/`).

Two image layouts (`ImageLayout`, docs/victims.md):

* `prefix` (the library's `Blip2Processor` / `InstructBlipProcessor`, and how BLIP-2 / InstructBLIP were trained):
  the image's query tokens come before BOS and all text. The library takes one image per prompt, so a prompt
  with several images is refused per trial (an `encode` error naming the switch), never silently merged.
* `slot` (MiniGPT-4's `get_context_emb`): each image's query tokens at its displayed slot, every text segment
  tokenised on its own (BOS on the first only); several images per prompt work.

A prompt without images runs the language model alone (the library classes require an image).
"""

from __future__ import annotations

import bisect
import enum
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import Blip2ForConditionalGeneration, InstructBlipForConditionalGeneration

from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.base import Encoded, HFRunner
from facet_probe.runners.hf.processors import normalize, resize01_with

PLACEHOLDER = "<ImageHere>"  # MiniGPT-4's name for an image slot in the rendered prompt


class ImageLayout(enum.StrEnum):
    """Where an image's query tokens go in the LLM input."""

    PREFIX = "prefix"  # before BOS and all text, one image per prompt (the library processors; BLIP-2/InstructBLIP)
    SLOT = "slot"  # at each image's slot, several images allowed (MiniGPT-4)


class PromptFormat(enum.StrEnum):
    """The conversation format used when the checkpoint has no chat template (the BLIP-2 hub checkpoints have none)."""

    PLAIN = "plain"  # the instruction as is (LAVIS feeds InstructBLIP-Vicuna the raw prompt); messages one per line
    MINIGPT4_VICUNA0 = "minigpt4_vicuna0"  # MiniGPT-4's CONV_VISION_Vicuna0: "{system}###Human: ... ###Assistant: "


_CONTENT = (
    "{%- if m['content'] is string -%}{{ m['content'] }}{%- else -%}{%- for c in m['content'] -%}"
    "{%- if c['type'] == 'image' -%}IMAGE{%- elif c['type'] == 'text' -%}{{ c['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
)

PLAIN_TEMPLATE = (
    "{%- for m in messages -%}{%- if not loop.first -%}{{ '\n' }}{%- endif -%}"
    + _CONTENT.replace("IMAGE", PLACEHOLDER) + "{%- endfor -%}"
)

#: MiniGPT-4's default system text (minigpt4/conversation/conversation.py, CONV_VISION_Vicuna0)
MINIGPT4_SYSTEM = ("Give the following image: <Img>ImageContent</Img>. You will be able to see the image once I "
                   "provide it to you. Please answer my questions.")

# SeparatorStyle.SINGLE with sep "###" and roles "Human: " / "Assistant: "; BOS comes from the tokenizer on the
# first segment (get_context_emb: add_special_tokens=i == 0); an image is "<Img><ImageHere></Img>"
# followed by a space (Chat.ask joins the image message and the question with ' '). The prompt's own system
# text replaces MiniGPT-4's when it has one.
MINIGPT4_VICUNA0_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'] }}"
    "{%- set turns = messages[1:] -%}{%- else -%}{{ '" + MINIGPT4_SYSTEM + "' }}{%- set turns = messages -%}"
    "{%- endif -%}{{ '###' }}{%- for m in turns -%}{{ 'Assistant: ' if m['role'] == 'assistant' else 'Human: ' }}"
    + _CONTENT.replace("IMAGE", "{{ '<Img>" + PLACEHOLDER + "</Img> ' }}") + "{{ '###' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Assistant: ' }}{%- endif -%}"
)

TEMPLATES = {PromptFormat.PLAIN: PLAIN_TEMPLATE, PromptFormat.MINIGPT4_VICUNA0: MINIGPT4_VICUNA0_TEMPLATE}
#: what closes an assistant turn in each format: the plain prompt has no turns and LAVIS ends every BLIP-2 /
#: InstructBLIP target with its LM's EOS ("</s>" for Vicuna, OPT and Flan-T5); MiniGPT-4's "###Assistant: reply###"
#: ends at its separator (its config's `end_sym`, which the reference's stop-reasoning template ends with)
END_OF_TURN = {PromptFormat.PLAIN: "</s>", PromptFormat.MINIGPT4_VICUNA0: "###"}


class _TextOnlyMixin:
    """The library BLIP-2 classes need an image; without `pixel_values` run the language model alone."""

    language_model: Any  # the library model's, as every method below: this mixin comes first in its bases

    def forward(self, pixel_values=None, input_ids=None, attention_mask=None, **kwargs):
        if pixel_values is None:
            kwargs.pop("qformer_input_ids", None), kwargs.pop("qformer_attention_mask", None)
            return self.language_model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return super().forward(  # type: ignore[misc]  # the library class after this mixin has it
            pixel_values=pixel_values, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    @torch.no_grad()
    def generate(self, pixel_values=None, input_ids=None, attention_mask=None, **kwargs):
        if getattr(kwargs.get("generation_config"), "stop_strings", None):  # a stop text needs the tokenizer
            kwargs.setdefault("tokenizer", getattr(self, "stop_tokenizer", None))
        if pixel_values is None:
            kwargs.pop("qformer_input_ids", None), kwargs.pop("qformer_attention_mask", None)
            return self.language_model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return super().generate(  # type: ignore[misc]  # the library class after this mixin has it
            pixel_values=pixel_values, input_ids=input_ids, attention_mask=attention_mask, **kwargs)


class Blip2TextOrImage(_TextOnlyMixin, Blip2ForConditionalGeneration):
    """`Blip2ForConditionalGeneration` that also answers prompts without an image."""


class InstructBlipTextOrImage(_TextOnlyMixin, InstructBlipForConditionalGeneration):
    """`InstructBlipForConditionalGeneration` that also answers prompts without an image."""


MODEL_CLASSES = {"blip-2": Blip2TextOrImage, "instructblip": InstructBlipTextOrImage}


def prefix_text(text: str) -> str:
    """The rendered prompt with its image placeholder removed (the query tokens go before it instead)."""
    pieces = [p for p in (s.strip(" ") for s in text.split(PLACEHOLDER)) if p]
    return "\n".join(pieces) if PLACEHOLDER in text else text


class Blip2Runner(HFRunner):
    """BLIP-2 / InstructBLIP / MiniGPT-4-as-BLIP-2 checkpoints (ViT + Q-Former + linear projection + LLM)."""

    family = "blip2"
    model_types = tuple(MODEL_CLASSES)  # MiniGPT-4's folder is a blip-2 one too: model=minigpt4_vicuna_7b runs it
    image_placeholder = PLACEHOLDER

    def __init__(self, *, image_layout: ImageLayout | str = ImageLayout.PREFIX,
                 prompt_format: PromptFormat | str = PromptFormat.PLAIN, qformer_max_tokens: int | None = 128,
                 stop_text: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.image_layout = _choice(ImageLayout, image_layout, "image_layout")
        self.prompt_format = _choice(PromptFormat, prompt_format, "prompt_format")
        if qformer_max_tokens is not None and int(qformer_max_tokens) < 1:
            raise ValueError("qformer_max_tokens must be >= 1 or null")
        self.qformer_max_tokens = None if qformer_max_tokens is None else int(qformer_max_tokens)
        self.stop_text = stop_text or None
        self.qformer_tokenizer: Any = None  # InstructBLIP's, once loaded
        #: the end of an assistant turn in `prompt_format` (`END_OF_TURN`): `###` for MiniGPT-4's, else `</s>`
        self.end_of_turn = END_OF_TURN[self.prompt_format]

    # --- family hooks ---------------------------------------------------------------------------------
    def _model_loader(self):
        assert self.folder is not None, "called while loading, once the folder is known"
        model_type = json.loads((self.folder / "config.json").read_text()).get("model_type")
        if model_type not in MODEL_CLASSES:
            raise ValueError(f"{self.name}: {self.folder} holds a {model_type!r} model, not one of the BLIP-2 "
                             f"family ({', '.join(MODEL_CLASSES)}); pick the config of its family")
        return MODEL_CLASSES[model_type]

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoImageProcessor, AutoTokenizer, Blip2Processor, InstructBlipProcessor

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        ip = AutoImageProcessor.from_pretrained(folder, backend="pil", **self.image_processor_kwargs)
        cfg = self.model.config
        if cfg.model_type == "instructblip":
            self.qformer_tokenizer = AutoTokenizer.from_pretrained(folder / "qformer_tokenizer")
            self.processor = InstructBlipProcessor(image_processor=ip, tokenizer=self.tokenizer,
                                                   qformer_tokenizer=self.qformer_tokenizer,
                                                   num_query_tokens=cfg.num_query_tokens)
        else:
            self.processor = Blip2Processor(image_processor=ip, tokenizer=self.tokenizer,
                                            num_query_tokens=cfg.num_query_tokens)
        self._mean, self._std = list(ip.image_mean), list(ip.image_std)
        if self.stop_text:  # e.g. MiniGPT-4's "###", which Vicuna's tokenizer spells as 1 or 2 tokens
            gen = self.model.generation_config
            ids = self.tokenizer(self.stop_text, add_special_tokens=False)["input_ids"]
            if len(ids) == 1:  # an end-of-sequence id too: the reply is cut there without decoding
                gen.eos_token_id = sorted({*self._eos_ids(gen), ids[0]})
            gen.stop_strings = [self.stop_text]  # generation stops on any spelling (needs the tokenizer)
            self.model.stop_tokenizer = self.tokenizer

    def _fallback_template(self) -> str:
        return TEMPLATES[self.prompt_format]

    def _family_settings(self) -> dict[str, Any]:
        return {"image_layout": self.image_layout.value, "prompt_format": self.prompt_format.value,
                "qformer_max_tokens": self.qformer_max_tokens, "stop_text": self.stop_text}

    def _tokenize(self, text: str, images: list):
        n_query = int(self.model.config.num_query_tokens)
        if text.count(PLACEHOLDER) != len(images):
            raise ValueError(f"the prompt has {text.count(PLACEHOLDER)} {PLACEHOLDER} slots but {len(images)} images")
        images01 = [resize01_with(self.processor.image_processor, im)[0] for im in images]
        plain = prefix_text(text)
        if self.image_layout == ImageLayout.PREFIX:
            if len(images) > 1:
                raise ValueError(f"{self.name}: image_layout=prefix (the library's BLIP-2 / InstructBLIP input) takes "
                                 f"one image per prompt and this prompt has {len(images)}; set "
                                 "model.image_layout=slot to place each image's query tokens at its slot "
                                 "(MiniGPT-4's way), or run a one-image dataset")
            enc = self.processor(text=[plain], images=images or None, add_special_tokens=self.add_special_tokens_for(
                plain), return_tensors="pt")
            ids = enc["input_ids"][0]
        else:
            ids = self._slot_ids(text, n_query)
        extras: dict[str, torch.Tensor] = {}
        if self.qformer_tokenizer is not None:
            extras["qformer_input_ids"] = self._qformer_ids(plain)
        return ids, {}, images01, extras

    def _slot_ids(self, text: str, n_query: int) -> torch.Tensor:
        """MiniGPT-4's layout: each text segment tokenised alone (BOS on the first only), query tokens between.
        Text that tokenises to the image token (MiniGPT-4's folder uses Vicuna's `<unk>`) is refused: it would be
        taken for a slot."""
        token = int(self.model.config.image_token_id)
        ids: list[int] = []
        for i, seg in enumerate(text.split(PLACEHOLDER)):
            if i:
                ids += [token] * n_query
            add_bos = i == 0 and self.add_special_tokens_for(text)
            piece = self.tokenizer(seg, add_special_tokens=add_bos)["input_ids"] if seg or add_bos else []
            if token in piece:
                raise ValueError(f"{self.name}: the prompt's text holds the image token "
                                 f"{self.tokenizer.convert_ids_to_tokens(token)!r}, which marks the image slots")
            ids += piece
        return torch.tensor(ids, dtype=torch.long)

    def _qformer_ids(self, text: str) -> torch.Tensor:
        """InstructBLIP's instruction for the Q-Former; LAVIS keeps the last `max_txt_len` (128) tokens."""
        tok = self.qformer_tokenizer
        if self.qformer_max_tokens is None:
            return torch.tensor(tok(text)["input_ids"], dtype=torch.long)
        side, tok.truncation_side = tok.truncation_side, "left"
        try:
            ids = tok(text, truncation=True, max_length=self.qformer_max_tokens)["input_ids"]
        finally:
            tok.truncation_side = side
        return torch.tensor(ids, dtype=torch.long)

    def _pad_id(self) -> int:
        """The base's padding id unless it is the image token, else the first EOS that is not: MiniGPT-4's slots
        are Vicuna's `<unk>`, which a Vicuna tokenizer may also pad with, and the model takes every image-token
        id in a batch for a query slot (docs/victims.md)."""
        pad, image = super()._pad_id(), self.image_token_id()
        if pad != image:
            return pad
        eos = [*self._eos_ids(self.model.generation_config), self.tokenizer.eos_token_id]
        others = [int(t) for t in eos if t is not None and t != image]
        if not others:
            raise RunnerError(f"{self.name}: the tokenizer pads with the image token (id {image}) and has no other "
                              "end-of-sequence id to pad with; set pad_token in its tokenizer_config.json")
        return others[0]

    def _until_eos(self, new: torch.Tensor, cfg) -> list[int]:
        """The reply's ids up to EOS, and up to `stop_text` when set (MiniGPT-4: `output_text.split('###')[0]`)."""
        ids = super()._until_eos(new, cfg)
        return cut_at_text(ids, self.tokenizer.decode, self.stop_text) if self.stop_text else ids

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised images (n, 3, S, S) in display order."""
        return {"pixel_values": self.to_model(torch.stack([normalize(x, self._mean, self._std) for x in images01]))}

    def _collate(self, encs: Sequence[Encoded], pixels: Sequence[dict[str, torch.Tensor]], *,
                 prompt_only: bool, side: str = "left") -> dict[str, torch.Tensor]:
        """The base batch, plus InstructBLIP's Q-Former instruction once per image (right-padded, masked)."""
        batch = super()._collate(encs, pixels, prompt_only=prompt_only, side=side)
        if self.qformer_tokenizer is None or "pixel_values" not in batch:
            return batch
        rows = [e.extras["qformer_input_ids"] for e, p in zip(encs, pixels, strict=True)
                for _ in range(int(p["pixel_values"].shape[0]) if p else 0)]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), int(self.qformer_tokenizer.pad_token_id or 0), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)], mask[i, :len(r)] = r, 1
        return {**batch, "qformer_input_ids": ids.to(self.input_device),
                "qformer_attention_mask": mask.to(self.input_device)}


def cut_at_text(ids: list[int], decode, stop: str) -> list[int]:
    """`ids` without the first tokens that spell `stop` and all after them (a token that also holds text before
    `stop` goes with it); `ids` unchanged when their text has no `stop`."""
    if stop not in decode(ids):
        return ids
    end = bisect.bisect_left(range(len(ids) + 1), True, key=lambda n: stop in decode(ids[:n]))
    start = end - 1
    while start > 0 and stop not in decode(ids[start:end]):
        start -= 1
    return ids[:start]


def _choice(enum_cls: type[enum.StrEnum], value: Any, key: str) -> Any:
    try:
        return enum_cls(value)
    except ValueError:
        raise ValueError(f"{key} must be one of {[v.value for v in enum_cls]}; got {value!r}") from None


LN_VISION_EPS = 1e-5  # MiniGPT-4's (LAVIS's) ln_vision after the EVA ViT


class MiniGPT4Runner(Blip2Runner):
    """MiniGPT-4 (Vicuna v0) as a BLIP-2 model: a folder written by `python -m facet_probe.runners.hf.minigpt4_weights`
    from MiniGPT-4's own checkpoint, its BLIP-2 ViT + Q-Former and its Vicuna; MiniGPT-4's layout and prompt."""

    def __init__(self, *, image_layout: ImageLayout | str = ImageLayout.SLOT,
                 prompt_format: PromptFormat | str = PromptFormat.MINIGPT4_VICUNA0, stop_text: str | None = "###",
                 **kwargs: Any) -> None:
        super().__init__(image_layout=image_layout, prompt_format=prompt_format, stop_text=stop_text, **kwargs)

    def _load_processor(self, folder: Path) -> None:
        super()._load_processor(folder)
        # MiniGPT-4's ln_vision is a torch LayerNorm with the default eps 1e-5; transformers' BLIP-2 gives its
        # post_layernorm the ViT blocks' 1e-6 (config.layer_norm_eps serves both)
        self.model.vision_model.post_layernorm.eps = LN_VISION_EPS

    def _resolve_folder(self) -> tuple[Path, str | None]:
        if not self.local_path:  # MiniGPT-4 is not published in this layout: the folder is built locally
            raise RunnerError(f"{self.name}: MiniGPT-4 has no Hugging Face checkpoint in BLIP-2 layout; build one with "
                              "`python -m facet_probe.runners.hf.minigpt4_weights --minigpt4 pretrained_minigpt4_7b.pth "
                              "--blip2 <BLIP-2 ViT + Q-Former> --vicuna <Vicuna-7B v0 folder> --out <folder>` "
                              "(docs/victims.md) and set model.local_path=<folder>")
        return super()._resolve_folder()
