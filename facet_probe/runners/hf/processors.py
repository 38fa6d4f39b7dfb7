"""Small processors of our own for the families whose transformers processor needs torchvision.

In transformers 5.x the Qwen-VL (Qwen2.5-VL, Qwen3-VL, Qwen3.5) and InternVL processors require a video
processor, which requires torchvision. These classes do the image side of those processors with the
library's own PIL image processors (`Qwen2VLImageProcessorPil`, `GotOcr2ImageProcessorPil`) for resizing,
then normalise and patchify in torch (differentiable), and expand the text placeholders exactly as the
library processors do. tests/runners/hf/test_processors.py checks them token-for-token and pixel-for-pixel
against the library classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def pil_to_chw(image) -> np.ndarray:
    """An RGB PIL image as a (3, H, W) uint8 array (the layout the PIL image processors use)."""
    return np.moveaxis(np.asarray(image.convert("RGB"), dtype=np.uint8), -1, 0)


def to_unit(array) -> torch.Tensor:
    """A 0..255 array or tensor as float32 in [0, 1]."""
    return torch.as_tensor(np.asarray(array), dtype=torch.float32) / 255.0


def normalize(x01: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """(x - mean) / std over the channel axis (-3), in float32 at least; differentiable."""
    dtype = torch.promote_types(x01.dtype, torch.float32)
    m = torch.tensor(list(mean), dtype=dtype, device=x01.device).view(3, 1, 1)
    s = torch.tensor(list(std), dtype=dtype, device=x01.device).view(3, 1, 1)
    return (x01.to(dtype) - m) / s


def resize01_with(image_processor, image, **overrides) -> torch.Tensor:
    """The library image processor's resize (and crop / pad / tiling) only, as [0,1] float: (N, 3, H, W)."""
    out = image_processor(images=[image], do_rescale=False, do_normalize=False, return_tensors="np", **overrides)
    return to_unit(out["pixel_values"])


def expand_placeholders(text: str, placeholder: str, replacements: Sequence[str]) -> str:
    """Replace the i-th `placeholder` in `text` with `replacements[i]`; the counts must agree."""
    pieces = text.split(placeholder)
    if len(pieces) != len(replacements) + 1:
        raise ValueError(f"the prompt has {len(pieces) - 1} {placeholder!r} placeholders "
                         f"but {len(replacements)} images")
    out = [pieces[0]]
    for rep, tail in zip(replacements, pieces[1:], strict=True):
        out += [rep, tail]
    return "".join(out)


def tokenize_expanded(tokenizer, text: str, placeholder: str, replacements: Sequence[str], image_token_id: int,
                      image_tokens: int, *, add_special_tokens: bool) -> torch.Tensor:
    """Token ids of `text` with each `placeholder` expanded (`expand_placeholders`), checked to hold the
    `image_tokens` image tokens the images need, as the library processors check."""
    full = expand_placeholders(text, placeholder, replacements)
    ids = torch.tensor(tokenizer(full, add_special_tokens=add_special_tokens)["input_ids"], dtype=torch.long)
    if int((ids == image_token_id).sum()) != image_tokens:
        raise ValueError("image tokens were lost in tokenisation (is the image token a special token?)")
    return ids


class QwenVLProcessor:
    """Qwen2.5-VL / Qwen3-VL / Qwen3.5 images: smart resize once, then patch flattening in torch."""

    def __init__(self, tokenizer, image_processor) -> None:
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.patch = int(image_processor.patch_size)
        self.merge = int(image_processor.merge_size)
        self.temporal = int(image_processor.temporal_patch_size)
        self.mean, self.std = list(image_processor.image_mean), list(image_processor.image_std)
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)

    def resize01(self, image) -> torch.Tensor:
        """(3, H, W) in [0,1], H and W multiples of patch*merge within the processor's pixel budget."""
        from transformers.image_utils import SizeDict

        ip = self.image_processor
        size = ip.size if isinstance(ip.size, SizeDict) else SizeDict(**ip.size)
        chw = ip.resize(pil_to_chw(image), size=size, resample=ip.resample, factor=self.patch * self.merge)
        return to_unit(chw)

    def patchify(self, x01: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(3, H, W) in [0,1] -> flattened patches (gh*gw, 3*T*p*p) and grid_thw (1, 3), as the library does."""
        x = normalize(x01, self.mean, self.std)
        c, h, w = x.shape
        p, m = self.patch, self.merge
        if h % (p * m) or w % (p * m):
            raise ValueError(f"image of {h}x{w} is not a multiple of {p * m}; resize it with resize01 first")
        gh, gw = h // p, w // p
        x = x.reshape(c, gh // m, m, p, gw // m, m, p).permute(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, p, p)
        x = x.unsqueeze(5).expand(*x.shape[:5], self.temporal, p, p)
        return x.reshape(gh * gw, c * self.temporal * p * p), self.grid_thw(x01)

    def grid_thw(self, x01: torch.Tensor) -> torch.Tensor:
        """(1, 3): the image's patch grid (t, h, w), as the library's `image_grid_thw`."""
        h, w = x01.shape[-2:]
        return torch.tensor([[1, h // self.patch, w // self.patch]], dtype=torch.long)

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        flat, grids = zip(*(self.patchify(x) for x in images01), strict=True)
        return {"pixel_values": torch.cat(flat), "image_grid_thw": torch.cat(grids)}

    def tokens_for(self, image01: torch.Tensor) -> int:
        h, w = image01.shape[-2:]
        return (h // self.patch) * (w // self.patch) // self.merge**2

    def encode(self, text: str, images, *, add_special_tokens: bool = False):
        """Rendered text + PIL images -> (input_ids, mm_token_type_ids, images01)."""
        images01 = [self.resize01(im) for im in images]
        return (*self.tokenize(text, images01, add_special_tokens=add_special_tokens), images01)

    def tokenize(self, text: str, images01: Sequence[torch.Tensor], *, add_special_tokens: bool = False):
        """Rendered text + resized images -> (input_ids, mm_token_type_ids): each pad token expanded."""
        counts = [self.tokens_for(x) for x in images01]
        ids = tokenize_expanded(self.tokenizer, text, self.image_token, [self.image_token * n for n in counts],
                                self.image_token_id, sum(counts), add_special_tokens=add_special_tokens)
        return ids, (ids == self.image_token_id).to(torch.int32)


class InternVLProcessor:
    """InternVL (`-HF`) images: 448-px tiles (+ thumbnail) or one tile, normalised in torch."""

    def __init__(self, tokenizer, image_processor, image_seq_length: int, max_tiles: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.image_seq_length = int(image_seq_length)
        # the library processor tiles by default (crop_to_patches=True) up to the image processor's max_patches
        self.max_tiles = int(max_tiles if max_tiles is not None else image_processor.max_patches)
        self.mean, self.std = list(image_processor.image_mean), list(image_processor.image_std)
        self.context = getattr(tokenizer, "context_image_token", None) or "<IMG_CONTEXT>"
        self.start = getattr(tokenizer, "start_image_token", None) or "<img>"
        self.end = getattr(tokenizer, "end_image_token", None) or "</img>"

    def tiles01(self, image) -> torch.Tensor:
        """(3, H, W) for one tile, else (T, 3, H, W) tiles then thumbnail, in [0,1]."""
        tiled = resize01_with(self.image_processor, image, crop_to_patches=self.max_tiles > 1,
                              max_patches=self.max_tiles)
        return tiled[0] if tiled.shape[0] == 1 else tiled

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        tiles = [x.unsqueeze(0) if x.ndim == 3 else x for x in images01]
        return {"pixel_values": torch.cat([normalize(t, self.mean, self.std) for t in tiles])}

    def tokens_for(self, image01: torch.Tensor) -> int:
        """Context tokens of one image: `image_seq_length` per tile."""
        return self.image_seq_length * (1 if image01.ndim == 3 else image01.shape[0])

    def encode(self, text: str, images, *, add_special_tokens: bool = False):
        """Rendered text + PIL images -> (input_ids, images01): each placeholder becomes <img>ctx*N</img>."""
        images01 = [self.tiles01(im) for im in images]
        return self.tokenize(text, images01, add_special_tokens=add_special_tokens), images01

    def tokenize(self, text: str, images01: Sequence[torch.Tensor], *, add_special_tokens: bool = False):
        """Rendered text + tiled images -> input_ids."""
        counts = [self.tokens_for(x) for x in images01]
        return tokenize_expanded(self.tokenizer, text, self.context,
                                 [self.start + self.context * n + self.end for n in counts],
                                 self.tokenizer.convert_tokens_to_ids(self.context), sum(counts),
                                 add_special_tokens=add_special_tokens)
