"""Pictures of large, flat, saturated shapes on white, drawn with Pillow and returned as PNG bytes.

No anti-aliasing, no noise: every pixel is either background or exactly one of `COLOURS`, which
keeps the pictures easy for a tiny vision tower and lets tests check them pixel by pixel.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw

from facet_probe.datasets.synthetic.vocab import COLOURS, SHAPES

BACKGROUND = (255, 255, 255)
MARGIN = 0.15  # fraction of a cell left empty on each side


@dataclass(frozen=True)
class Placed:
    """One shape in one cell of a `grid` x `grid` picture (cells numbered row by row)."""

    shape: str
    colour: str
    cell: int = 0


def _box(cell: int, grid: int, size: int) -> tuple[int, int, int, int]:
    step = size / grid
    row, col = divmod(cell, grid)
    pad = step * MARGIN
    return (round(col * step + pad), round(row * step + pad),
            round((col + 1) * step - pad) - 1, round((row + 1) * step - pad) - 1)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int],
                fill: tuple[int, int, int]) -> None:
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    elif shape == "triangle":
        draw.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=fill)
    elif shape == "diamond":
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=fill)
    elif shape == "cross":
        third_w, third_h = (x1 - x0 + 1) / 3, (y1 - y0 + 1) / 3
        draw.rectangle((round(x0 + third_w), y0, round(x1 - third_w), y1), fill=fill)
        draw.rectangle((x0, round(y0 + third_h), x1, round(y1 - third_h)), fill=fill)
    else:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def render_png(placed: Sequence[Placed], size: int = 64, grid: int = 1) -> bytes:
    """A `size` x `size` PNG with each shape drawn in its cell."""
    if size < 16:
        raise ValueError(f"image_size must be at least 16 pixels, got {size}")
    img = Image.new("RGB", (size, size), BACKGROUND)
    draw = ImageDraw.Draw(img)
    for p in placed:
        if p.colour not in COLOURS:
            raise ValueError(f"unknown colour {p.colour!r}; known: {', '.join(COLOURS)}")
        if not 0 <= p.cell < grid * grid:
            raise ValueError(f"cell {p.cell} is outside a {grid}x{grid} grid")
        _draw_shape(draw, p.shape, _box(p.cell, grid, size), COLOURS[p.colour])
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()
