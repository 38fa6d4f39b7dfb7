"""Each distinct image seen once in the audit's generation: decoded and resized once per window of requests, and
encoded by the vision tower once, its features reused across the K orderings and repeats of an item (and across
items that share it).

`ImageReuseMixin` is one role of `HFRunner` (base.py). An image is known by the SHA-256 of its bytes
(`ImageRef.sha256`) and the runner's image settings. Its vision features (`get_image_features`, what the model's
forward computes from the pixels) are kept for the last `image_features_cache` distinct images (least recently
used out first; 0: off) on the model's device, and go to `generate` as transformers' own pre-encoded input
`mm_encoder_outputs`: the model places them at the image tokens exactly as it places the features it computes
(`get_placeholder_mask` + `masked_scatter`, rows in batch order, images in display order), and only the prefill
reads them. A family reuses features where its adapter counts an image's tokens (`image_tokens`) and its forward
takes `mm_encoder_outputs` (LLaVA, Qwen3.5 / Qwen2.5-VL, Gemma3, InternVL; docs/hf_models.md). The attack's
calls and teacher forcing compute features from pixels: gradients flow there, and their images are not the
stored ones.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import torch

from facet_probe.core.items import ImageRef
from facet_probe.runners.base import Request
from facet_probe.runners.hf.encoded import Encoded
from facet_probe.runners.hf.parts import HFParts

log = logging.getLogger("facet_probe.runners.hf")


def check_cache_size(model: str, images: Any) -> int:
    """`image_features_cache` as a whole number of images >= 0 (0: off), or one `ValueError` saying so."""
    if isinstance(images, bool) or not isinstance(images, int) or images < 0:
        raise ValueError(f"{model}: image_features_cache is the number of images whose vision features are kept "
                         f"(a whole number >= 0; 0 turns the reuse off); got {images!r}")
    return images


def takes_pre_encoded_images(model) -> bool:
    """Whether `generate` can take this model's image features pre-encoded: its forward takes `mm_encoder_outputs`
    and this transformers passes them to the prefill only (5.25 does; older releases fall back to pixels)."""
    from transformers.generation import utils

    return ("mm_encoder_outputs" in getattr(utils, "MULTIMODAL_INPUTS_TO_DROP_OUTSIDE_PREFILL", ())
            and getattr(model, "_supports_mm_encoder_outputs", lambda: False)())


class LRU:
    """A mapping of at most `capacity` entries; the least recently used goes first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


class ImageReuseMixin(HFParts):
    """Prepared images per window, vision features per LRU window of images (see the module docstring)."""

    #: why this runner computes features from pixels after all (set once, logged once); None: it reuses them
    _features_off: str | None = None
    _image_settings: str | None = None  # the settings that name an image's preparation (`image_key`), made once
    _features: LRU | None = None  # the kept vision features (`_features_lru`), made at first use

    def image_key(self, ref: ImageRef) -> tuple[str, str]:
        """What names an image's preparation and features: its digest and the runner's image settings."""
        settings = self._image_settings
        if settings is None:
            settings = self._image_settings = json.dumps(
                {"image_processor_kwargs": self.image_processor_kwargs, **self._family_settings()},
                sort_keys=True, default=str)
        return ref.sha256, settings

    def prepared_images(self, refs: Sequence[ImageRef], memo: dict) -> list:
        """The images prepared for `_tokenize` (`prepare_image`), each decoded and prepared once per `memo`."""
        out = []
        for ref in refs:
            key = self.image_key(ref)
            if key not in memo:
                memo[key] = self.prepare_image(ref.to_pil())
            out.append(memo[key])
        return out

    def batch_image_inputs(self, batch: Sequence[tuple[Request, Encoded]], features: dict | None = None,
                           prefilled: Sequence[int] | None = None) -> tuple[list[dict], Any | None]:
        """Each row's image inputs for `generate_batch` and the batch's `mm_encoder_outputs["image"]` (None:
        the rows carry their pixels). `features`: `batch_image_features(batch)`; `prefilled`: per row, how many
        of its first images a prefilled prefix holds already (prefix_reuse.py; only with `features`)."""
        if features is None:
            return [self._model_pixels(e) for _, e in batch], None
        skip = prefilled or [0] * len(batch)
        rows = [features[self.image_key(ref)] for (req, _), n in zip(batch, skip, strict=True)
                for ref in req.prompt.images()[n:]]
        inputs = [self.image_side_inputs(e.images01[n:]) if e.images01[n:] else {}
                  for (_, e), n in zip(batch, skip, strict=True)]
        return inputs, self._features_output(torch.cat(rows)) if rows else None

    def batch_image_features(self, batch: Sequence[tuple[Request, Encoded]]) -> dict | None:
        """The vision features of the batch's images by `image_key`: from the cache, the missing ones computed
        in one call; None where this runner or batch gives `generate` pixels instead."""
        return self._batch_features(batch) if self._reuses_features(batch) else None

    def _reuses_features(self, batch: Sequence[tuple[Request, Encoded]]) -> bool:
        if self.image_features_cache == 0 or self._features_off or not any(e.images01 for _, e in batch):
            return False
        if not takes_pre_encoded_images(self.model):
            self._turn_features_off("its forward or this transformers takes no pre-encoded image features")
            return False
        if self.image_tokens(next(e for _, e in batch if e.images01).images01[0]) is None:
            self._turn_features_off("its adapter does not count an image's tokens")
            return False
        return True

    def _turn_features_off(self, why: str) -> None:
        self._features_off = why
        log.info("%s: each prompt's images go through the vision tower (%s)", self.name, why)

    def _batch_features(self, batch: Sequence[tuple[Request, Encoded]]) -> dict | None:
        """The features of the batch's images by key, in the container `_features_output` wraps; None where the
        model's output cannot be reused."""
        cache = self._features_lru()
        found: dict = {}
        missing: dict = {}
        for req, enc in batch:
            for ref, image01 in zip(req.prompt.images(), enc.images01, strict=True):
                key = self.image_key(ref)
                if key not in found and key not in missing:
                    hit = cache.get(key)
                    if hit is None:
                        missing[key] = image01
                    else:
                        found[key] = hit
        if missing:
            computed = self._image_features(list(missing.values()))
            if computed is None:
                return None
            for key, features in zip(missing, computed, strict=True):
                cache.put(key, features)
                found[key] = features
        return found

    def _image_features(self, images01: list[torch.Tensor]) -> list[torch.Tensor] | None:
        """One (tokens, hidden) tensor per image, from one vision-tower call over `images01`."""
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        with torch.no_grad():
            out = self.model.get_image_features(**self.pixel_inputs(images01), return_dict=True)
        if not isinstance(out, BaseModelOutputWithPooling) or getattr(out, "deepstack_features", None) is not None:
            self._turn_features_off(f"its image features ({type(out).__name__}) carry more than the pooled output")
            return None
        pooled: Any = out.pooler_output  # one tensor, or a list of them (LLaVA, Qwen)
        self._features_listed = isinstance(pooled, list | tuple)
        flat = torch.cat([p.reshape(-1, p.shape[-1]) for p in pooled]) if self._features_listed else (
            pooled.reshape(-1, pooled.shape[-1]))
        counts = [self.image_tokens(x) or 0 for x in images01]  # None (cannot say): the check below turns reuse off
        if sum(counts) != flat.shape[0]:
            self._turn_features_off(f"its vision tower gave {flat.shape[0]} feature rows for {sum(counts)} "
                                    "image tokens")
            return None
        return [part.clone() for part in flat.split(counts)]  # a clone each: an evicted image frees its memory

    def _features_output(self, rows: torch.Tensor):
        """`rows` (all the batch's image tokens, hidden) as the model's `get_image_features` output: a list of
        tensors (LLaVA, Qwen) or one batched tensor (Gemma3, InternVL), which its forward flattens alike."""
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        return BaseModelOutputWithPooling(pooler_output=[rows] if self._features_listed else rows[None])

    def _features_lru(self) -> LRU:
        cache = self._features
        if cache is None or cache.capacity != self.image_features_cache:
            cache = self._features = LRU(self.image_features_cache)
        return cache

    def forget_images(self) -> None:
        """Drop every kept feature (the model is closed)."""
        self._features = None
        self._features_off = None
