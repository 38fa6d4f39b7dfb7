"""Shared, cached samples of every synthetic set (generation is cheap, but several tests reuse them)."""

from __future__ import annotations

from functools import cache

from facet_probe.core.items import Item
from facet_probe.datasets.synthetic import SYNTHETIC_SETS

SET_NAMES = sorted(SYNTHETIC_SETS)
IMAGE_SETS = ("synthetic_visual_mcq", "synthetic_image_set", "synthetic_mixed")


@cache
def sample(name: str, n: int = 300, split: str = "test", seed: int = 42, image_size: int = 64) -> tuple[Item, ...]:
    """The first n items; large statistical samples pass a small image_size to render faster."""
    return tuple(SYNTHETIC_SETS[name](name=name, n=n, split=split, seed=seed, image_size=image_size).load())

