"""The pictures decode, and show exactly the shapes and colours their metadata (and questions) claim."""

from __future__ import annotations

import pytest
from PIL import Image
from synthetic_samples import IMAGE_SETS, sample

from facet_probe.core.items import ImageRef
from facet_probe.datasets.synthetic.draw import BACKGROUND, Placed, render_png
from facet_probe.datasets.synthetic.vocab import COLOURS, SHAPES


def classify(img: Image.Image, box: tuple[int, int, int, int]) -> tuple[str, str]:
    """(shape, colour) of the single shape inside `box`, read from the pixels alone."""
    region = img.crop(box)
    w, h = region.size
    px = region.load()
    ink = [(x, y) for y in range(h) for x in range(w) if px[x, y] != BACKGROUND]
    assert ink, "no shape drawn"
    (rgb,) = {px[x, y] for x, y in ink}  # flat colour, no anti-aliasing
    (colour,) = [name for name, value in COLOURS.items() if value == rgb]
    xs, ys = [x for x, _ in ink], [y for _, y in ink]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    bw, bh = x1 - x0 + 1, y1 - y0 + 1
    fill = len(ink) / (bw * bh)

    def row_width(y: int) -> float:
        return sum(1 for x in range(x0, x1 + 1) if px[x, y] != BACKGROUND) / bw

    top, middle, bottom = row_width(y0), row_width((y0 + y1) // 2), row_width(y1)
    if fill > 0.95:
        shape = "square"
    elif bottom > 0.8:
        shape = "triangle"
    elif fill > 0.7:
        shape = "circle"
    elif 0.25 < top < 0.45 and middle > 0.95:
        shape = "cross"
    else:
        shape = "diamond"
    return shape, colour


def cell_box(cell: int, grid: int, size: int) -> tuple[int, int, int, int]:
    step = size // grid
    row, col = divmod(cell, grid)
    return col * step, row * step, (col + 1) * step, (row + 1) * step


@pytest.mark.parametrize("size", [32, 64, 128])
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_is_recognisable_at_every_size(shape, size):
    for colour in COLOURS:
        img = ImageRef.from_bytes(render_png([Placed(shape, colour)], size)).to_pil()
        assert classify(img, (0, 0, size, size)) == (shape, colour)


def test_unknown_shapes_and_colours_are_refused():
    with pytest.raises(ValueError, match="unknown shape"):
        render_png([Placed("hexagon", "red")])
    with pytest.raises(ValueError, match="unknown colour"):
        render_png([Placed("circle", "teal")])


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
@pytest.mark.parametrize("name", IMAGE_SETS)
def test_pictures_decode_and_show_what_the_item_says(name):
    for item in sample(name)[:120]:
        for comp in (*item.fixed, *item.components):
            if comp.image is None:
                continue
            img = comp.image.to_pil()
            assert img.size == (64, 64) and comp.image.read_bytes().startswith(b"\x89PNG")
            if "scene" in comp.metadata:
                grid = comp.metadata["grid"]
                for obj in comp.metadata["scene"]:
                    assert classify(img, cell_box(obj["cell"], grid, 64)) == (obj["shape"], obj["colour"])
                used = {obj["cell"] for obj in comp.metadata["scene"]}
                for cell in set(range(grid * grid)) - used:
                    region = img.crop(cell_box(cell, grid, 64))
                    assert region.getcolors() == [(32 * 32, BACKGROUND)], "empty cells stay blank"
            else:
                assert classify(img, (0, 0, 64, 64)) == (comp.metadata["shape"], comp.metadata["colour"])
