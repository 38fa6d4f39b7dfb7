"""The attack variable: a sample's images in [0,1] pixel space at the model's resolution.

The adapter's `encode` resizes each image once (the processor's resize / crop) and hands back [0,1] float
tensors; everything after that (normalisation, Qwen's patch flattening, InternVL's single tile) happens
in the adapter's differentiable `pixel_inputs`, so a gradient reaches these tensors. This module keeps the
clean images and does the PGD bookkeeping on top: random start inside the ball, the sign step, the
projection onto ``||x_adv - x||_inf <= eps`` followed by the clamp to [0,1], and the 8-bit quantisation of
what is evaluated and saved (lossless PNG, so the saved image reproduces the evaluated one exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from facet_probe.store.atomic import atomic_path


class PixelBox:
    """The feasible set of one sample: {x : ||x - clean||_inf <= eps, 0 <= x <= 1}, one tensor per image."""

    def __init__(self, clean: Sequence[torch.Tensor], eps: float) -> None:
        if not clean:
            raise ValueError("a sample to attack needs at least one image")
        for x in clean:
            if x.ndim != 3 or x.shape[0] != 3:
                raise ValueError(f"attack images must be (3, H, W) at the model's resolution, got {tuple(x.shape)} "
                                 "(InternVL: build the adapter with max_tiles=1)")
        self.clean = [x.detach().float().clamp(0, 1) for x in clean]
        self.eps = float(eps)
        self.lower = [(x - self.eps).clamp(0, 1) for x in self.clean]
        self.upper = [(x + self.eps).clamp(0, 1) for x in self.clean]

    def project(self, images: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The nearest feasible point (per pixel): into the eps ball, then into [0,1]."""
        return [torch.maximum(torch.minimum(x.detach(), hi), lo) for x, lo, hi in
                zip(images, self.lower, self.upper, strict=True)]

    def random_start(self, generator: torch.Generator) -> list[torch.Tensor]:
        """clean + U(-eps, eps), projected (the paper's random initialisation)."""
        out = []
        for x in self.clean:
            noise = torch.rand(x.shape, generator=generator, dtype=torch.float32) * 2 - 1
            out.append(x + self.eps * noise.to(x.device))
        return self.project(out)

    def step(self, images: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], alpha: float) -> list[torch.Tensor]:
        """One signed-gradient descent step on the loss (x - alpha * sign(grad)), projected."""
        return self.project([x.detach() - alpha * g.sign() for x, g in zip(images, grads, strict=True)])

    def quantize(self, images: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The 8-bit image (k/255) nearest to `images` that is still feasible.

        Rounding can step past the ball when eps (or the clean image) is off the 8-bit grid; levels are
        therefore clamped to the ones inside the ball. Where no level fits (eps below half a level around an
        off-grid clean pixel) the clean value is kept."""
        out = []
        for x, c, lo, hi in zip(images, self.clean, self.lower, self.upper, strict=True):
            k = torch.round(x.detach().clamp(0, 1) * 255)
            lo_k, hi_k = torch.ceil(lo * 255 - 1e-4), torch.floor(hi * 255 + 1e-4)
            k = torch.minimum(torch.maximum(k, lo_k), hi_k)
            out.append(torch.where(lo_k <= hi_k, k / 255, c))
        return out

    def linf(self, images: Sequence[torch.Tensor]) -> float:
        """max_i ||images_i - clean_i||_inf."""
        return max(float((x.detach().float() - c).abs().max()) for x, c in zip(images, self.clean, strict=True))

    def contains(self, images: Sequence[torch.Tensor], tol: float = 1e-6) -> bool:
        return all(bool(((x >= lo - tol) & (x <= hi + tol)).all()) for x, lo, hi in
                   zip(images, self.lower, self.upper, strict=True))


def to_uint8(x01: torch.Tensor) -> np.ndarray:
    """(3, H, W) in [0,1] -> (H, W, 3) uint8, rounding to the nearest level."""
    return (x01.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()


def save_png(x01: torch.Tensor, path: str | Path) -> Path:
    """Lossless PNG of a [0,1] image at its (model) resolution."""
    from PIL import Image

    path = Path(path)
    with atomic_path(path) as tmp:
        Image.fromarray(to_uint8(x01)).save(tmp, format="PNG")
    return path


def load_png(path: str | Path) -> torch.Tensor:
    """A PNG as (3, H, W) float in [0,1] (inverse of `save_png` for 8-bit images)."""
    from PIL import Image

    with Image.open(path) as im:
        arr = np.asarray(im.convert("RGB"), dtype=np.uint8)
    return torch.from_numpy(arr.copy()).permute(2, 0, 1).float() / 255
