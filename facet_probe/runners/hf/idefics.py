"""IDEFICS adapter (`HuggingFaceM4/idefics-9b-instruct`): Flamingo-style gated cross-attention over interleaved images.

IDEFICS is transformers' open reproduction of Flamingo (a frozen CLIP-style ViT, a Perceiver resampler, gated
cross-attention blocks in a LLaMA decoder), the native relative of OpenFlamingo-9B (see docs/victims.md for why
OpenFlamingo's own checkpoints do not load into it). Each image is one `<image>` token at its displayed slot;
the text tokens after it attend (by cross-attention) to that image's resampled features only, through the
`image_attention_mask` (batch, tokens, images) the library processor derives from the token ids.

The token ids are built as `IdeficsProcessor` builds them (BOS, then each text piece stripped of spaces and
each image as `<fake_token_around_image><image><fake_token_around_image>`) but without handing it the text
pieces: the library processor downloads any text piece that parses as a URL. Images are resized once by the
library's image processor (224 px square, bicubic) and normalised in torch; the per-token image index travels
as a token field and becomes the library's one-hot mask when a batch is collated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from facet_probe.core.prompts import Prompt
from facet_probe.runners.hf.base import Encoded, HFRunner
from facet_probe.runners.hf.processors import normalize, to_unit

IMAGE_TOKEN = "<image>"
FAKE_TOKEN = "<fake_token_around_image>"
END_OF_UTTERANCE = "<end_of_utterance>"
#: token field: 1 + the index of the image a token attends to (0: none); collated into `image_attention_mask`
IMAGE_SLOT = "idefics_image_slot"

# The idefics-9b-instruct conversation ("User: ...<end_of_utterance>\nAssistant: ...<end_of_utterance>\n"),
# every <image> at its slot; a system message renders as "System: ...".
IDEFICS_TEMPLATE = (
    "{%- for m in messages -%}{{ m['role'].capitalize() }}"
    "{%- if m['content'] is string -%}{{ ': ' + m['content'] }}"
    "{%- else -%}{{ ':' if m['content'] and m['content'][0]['type'] == 'image' else ': ' }}"
    "{%- for c in m['content'] -%}{%- if c['type'] == 'image' -%}{{ '<image>' }}"
    "{%- elif c['type'] == 'text' -%}{{ c['text'] }}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_utterance>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{ 'Assistant:' }}{%- endif -%}"
)


def packed_text(text: str, bos: str) -> str:
    """The text `IdeficsProcessor` tokenises for `text` split at each `<image>`: BOS, each non-empty piece with
    its spaces stripped, each image `<fake><image><fake>` (`<image><fake>` right after another image)."""
    body = text.removeprefix(bos) if bos else text
    out, last_was_image = [bos or ""], False
    for i, piece in enumerate(body.split(IMAGE_TOKEN)):
        if i > 0:  # an image came before this piece
            out.append(IMAGE_TOKEN + FAKE_TOKEN if last_was_image else FAKE_TOKEN + IMAGE_TOKEN + FAKE_TOKEN)
            last_was_image = True
        if piece.strip(" "):
            out.append(piece.strip(" "))
            last_was_image = False
    return "".join(out)


def image_slots(input_ids: torch.Tensor, tokenizer) -> torch.Tensor:
    """(L,) long: 1 + the index of the most recent image at each token (0: none, or after an EOS), exactly
    the library processor's incremental mask shifted by one."""
    from transformers.models.idefics.processing_idefics import image_attention_mask_for_packed_input_ids_pt

    incremental, _ = image_attention_mask_for_packed_input_ids_pt(input_ids[None], tokenizer)
    return incremental[0].long() + 1


def one_hot_slots(slots: torch.Tensor, n_images: int) -> torch.Tensor:
    """(B, L) slots -> the (B, L, n_images) `image_attention_mask` the library processor returns."""
    return torch.nn.functional.one_hot(slots.long(), num_classes=n_images + 1)[..., 1:]


def resize01(image_processor, image) -> torch.Tensor:
    """The library image processor's resize only, as a [0,1] float (3, S, S)."""
    out = image_processor(images=[image], do_rescale=False, do_normalize=False, return_tensors="np")
    return to_unit(getattr(out, "pixel_values", out))[0]


class IdeficsRunner(HFRunner):
    """IDEFICS (v1) through `IdeficsForVisionText2Text`, the labelled stand-in for OpenFlamingo-9B."""

    family = "idefics"
    model_types = ("idefics",)
    image_placeholder = IMAGE_TOKEN
    end_of_turn = END_OF_UTTERANCE  # "Assistant: reply<end_of_utterance>\n" (not the </s> listed first)

    def _model_loader(self):
        from transformers import IdeficsForVisionText2Text

        return IdeficsForVisionText2Text

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoImageProcessor, AutoTokenizer, IdeficsProcessor

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        ip = AutoImageProcessor.from_pretrained(folder, backend="pil", **self.image_processor_kwargs)
        self.processor = IdeficsProcessor(image_processor=ip, tokenizer=self.tokenizer)
        self._mean, self._std = list(ip.image_mean), list(ip.image_std)
        self._size = int(ip.image_size)
        self._stop_at_end_of_utterance()

    def _stop_at_end_of_utterance(self) -> None:
        """Stop at `<end_of_utterance>` and never emit image tokens, as the idefics-9b-instruct card generates."""
        tok, cfg = self.tokenizer, self.model.generation_config
        ids = {t: tok.convert_tokens_to_ids(t) for t in (END_OF_UTTERANCE, IMAGE_TOKEN, FAKE_TOKEN)}
        known = {t: i for t, i in ids.items() if isinstance(i, int) and i != tok.unk_token_id}
        eos = self._eos_ids(cfg)
        if END_OF_UTTERANCE in known and known[END_OF_UTTERANCE] not in eos:
            cfg.eos_token_id = [*eos, known[END_OF_UTTERANCE]]
        bad = [[known[t]] for t in (IMAGE_TOKEN, FAKE_TOKEN) if t in known]
        cfg.bad_words_ids = bad or None

    def _family_settings(self) -> dict[str, Any]:
        return {"stop_tokens": [END_OF_UTTERANCE], "banned_tokens": [IMAGE_TOKEN, FAKE_TOKEN]}

    def _fallback_template(self) -> str:
        return IDEFICS_TEMPLATE

    def image_token_id(self) -> int | None:
        return self.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)

    def prepare_image(self, image) -> torch.Tensor:
        """(3, S, S) in [0,1]: the image processor's resize."""
        return resize01(self.processor.image_processor, image)

    def _tokenize(self, text: str, images: list):
        bos = self.tokenizer.bos_token or ""
        ids = torch.tensor(self.tokenizer(packed_text(text, bos), add_special_tokens=False)["input_ids"],
                           dtype=torch.long)
        token = self.image_token_id()
        n_tokens = int((ids == token).sum()) if token is not None else 0
        if n_tokens != len(images):
            raise ValueError(f"the prompt has {n_tokens} {IMAGE_TOKEN} tokens but {len(images)} images")
        return ids, {IMAGE_SLOT: image_slots(ids, self.tokenizer)}, list(images)

    def encode(self, prompt: Prompt, target_text: str | None = None, *, images: list | None = None) -> Encoded:
        """As the base, but target tokens keep attending to the last image (as generated tokens do)."""
        enc = super().encode(prompt, target_text, images=images)
        if enc.target_span is not None:
            slots = enc.token_fields[IMAGE_SLOT].clone()
            slots[enc.target_span[0]:] = slots[enc.prompt_len - 1]
            enc.token_fields = {**enc.token_fields, IMAGE_SLOT: slots}
        return enc

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalised images (n, 3, S, S) in display order; `_collate` groups them per sample."""
        return {"pixel_values": self.to_model(torch.stack([normalize(x, self._mean, self._std) for x in images01]))}

    def _collate(self, encs: Sequence[Encoded], pixels: Sequence[dict[str, torch.Tensor]], *,
                 prompt_only: bool, side: str = "left") -> dict[str, torch.Tensor]:
        """The base's padded ids and mask, plus pixels (B, N, 3, S, S) zero-padded to the batch's most images
        (at least one, as the library pads text-only prompts) and the one-hot `image_attention_mask`."""
        batch = super()._collate(encs, [{} for _ in encs], prompt_only=prompt_only, side=side)
        slots = batch.pop(IMAGE_SLOT)
        per_sample = [p.get("pixel_values") for p in pixels]
        n = max([1, *(len(p) for p in per_sample if p is not None)])
        blank = self.to_model(torch.zeros(n, 3, self._size, self._size))
        rows = [blank if p is None or len(p) == 0 else torch.cat([p, blank[:n - len(p)]]) for p in per_sample]
        batch["pixel_values"] = torch.stack(rows)
        batch["image_attention_mask"] = one_hot_slots(slots, n)
        return batch
