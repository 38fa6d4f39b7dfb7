"""Prompt to model input: the chat template (checked to keep images at their slots), token ids with image
placeholders expanded, the [0,1] images, a target continuation's span, and what each image became.

`EncodingMixin` is one role of `HFRunner` (base.py); the family hooks `_tokenize`, `chat_template_options`,
`_fallback_template` and `image_placeholder` say how a family does it.
"""

from __future__ import annotations

from typing import Any

import torch

from facet_probe.core.prompts import ImagePart, Prompt, TextPart
from facet_probe.runners.hf.encoded import Encoded
from facet_probe.runners.hf.parts import HFParts
from facet_probe.runners.hf.templates import checkpoint_template, choose_template, keeps_order


def chat_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Transformers chat messages: an optional system string, then each message's parts in display order
    (`{"type": "image"}` at each image slot). Also used by the tiny VLM's training data, so training sees
    exactly what the runner sends."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}] if prompt.system else []
    for m in prompt.messages:
        content = [{"type": "text", "text": p.text} if isinstance(p, TextPart) else {"type": "image"}
                   for p in m.parts if isinstance(p, TextPart | ImagePart)]
        msgs.append({"role": m.role, "content": content})
    return msgs


class EncodingMixin(HFParts):
    """Prompt -> `Encoded` (see the module docstring)."""

    def encode(self, prompt: Prompt, target_text: str | None = None, *, images: list | None = None) -> Encoded:
        """Token ids, [0,1] images and (optionally) the target span for one prompt. `images`: the prompt's images
        already prepared (`prepare_image`, e.g. once per window of requests); None: decoded and prepared here."""
        self.check_ready()
        text = self.render(prompt)
        if images is None:
            images = [self.prepare_image(ref.to_pil()) for ref in prompt.images()]
        ids, fields, images01, *extras = self._tokenize(text, images)
        enc = Encoded(ids, images01, fields, int(ids.shape[0]), None, text, extras[0] if extras else {})
        if target_text is not None:
            tids = torch.tensor(self.tokenizer(target_text, add_special_tokens=False)["input_ids"], dtype=ids.dtype)
            if tids.numel() == 0:
                raise ValueError("target_text tokenises to nothing")
            enc.input_ids = torch.cat([ids, tids])
            enc.token_fields = {k: torch.cat([v, v.new_zeros(tids.shape[0])]) for k, v in fields.items()}
            enc.target_span = (len(ids), len(ids) + len(tids))
        return enc

    def tokenize(self, text: str, images: list) -> tuple:
        """A rendered prompt and its decoded PIL images -> what `_tokenize` returns (the vLLM runner counts with it)."""
        return self._tokenize(text, [self.prepare_image(im) for im in images])

    def render(self, prompt: Prompt) -> str:
        """The prompt through the chat template, images at their displayed slots, generation prompt added."""
        return self.tokenizer.apply_chat_template(self.chat_messages(prompt), chat_template=self._template,
                                                  add_generation_prompt=True, tokenize=False,
                                                  **self.chat_template_options())

    def chat_messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        """The family's chat messages for `prompt` (the shared conversion unless a family overrides it)."""
        return chat_messages(prompt)

    def add_special_tokens_for(self, text: str) -> bool:
        """Let the tokenizer add BOS only when the template did not (as transformers' processors do)."""
        bos = self.tokenizer.bos_token
        return not (bos and text.startswith(bos))

    def to_model(self, x: torch.Tensor) -> torch.Tensor:
        """Move a float tensor to the model's device and dtype (differentiably)."""
        return x.to(device=self.input_device, dtype=self.compute_dtype)

    @property
    def input_device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    @property
    def compute_dtype(self) -> torch.dtype:
        return self.model.dtype

    def image_token_id(self) -> int | None:
        """The token id that stands for image features in the input ids (config names differ by family)."""
        cfg = self.model.config
        for attr in ("image_token_id", "image_token_index", "media_placeholder_token_id"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int):
                return value
        return None

    def image_token_counts(self, encoded: Encoded) -> list[int]:
        """Image tokens per image, in display order: the lengths of the runs of the image token id."""
        token = self.image_token_id()
        if token is None:
            return []
        runs, n = [], 0
        for t in encoded.prompt_only().input_ids.tolist():
            if t == token:
                n += 1
            elif n:
                runs.append(n)
                n = 0
        return [*runs, n] if n else runs

    def image_record(self, encoded: Encoded) -> dict[str, Any]:
        """What each image became for the model: its image tokens and the pixel shape it was resized to."""
        shapes = [list(x.shape) for x in encoded.images01] or [
            list(v.shape) for k, v in encoded.extras.items() if k == "pixel_values"]
        return {"image_tokens": self.image_token_counts(encoded), "image_pixels": shapes}

    def _choose_template(self) -> str:
        """The configured template, else the checkpoint's, provided it keeps images at their slots
        (`templates.choose_template`, shared with the vLLM runner)."""
        template, self._template_label = choose_template(
            self.name, self.family, self.chat_template,
            checkpoint_template(self.tokenizer, self.processor, self.folder), self._fallback_template(),
            self._keeps_order, self.folder)
        return template

    def _keeps_order(self, template: str) -> bool:
        """Render text, image, text, image, text and check the five pieces come out in that order."""
        return keeps_order(self.tokenizer, template, self.image_placeholder, self.chat_template_options())
