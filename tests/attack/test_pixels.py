"""The attack variable stays in the eps ball and in [0,1]; the saved PNG is exactly the evaluated image."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from facet_probe.attack.pixels import PixelBox, load_png, save_png

EPS = st.sampled_from([0.0, 1 / 255, 8 / 255, 16 / 255, 0.05, 0.3])


def clean_image(seed: int, on_grid: bool = True) -> torch.Tensor:
    x = torch.rand(3, 6, 5, generator=torch.Generator().manual_seed(seed))
    x[0, 0, 0], x[1, 0, 0] = 0.0, 1.0  # pixels at the borders of [0,1]
    return torch.round(x * 255) / 255 if on_grid else x


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), eps=EPS, alpha=st.sampled_from([1 / 255, 2 / 255, 0.1]),
       scale=st.sampled_from([0.01, 1.0, 100.0]), on_grid=st.booleans())
def test_every_step_stays_in_the_ball_and_in_unit_range(seed, eps, alpha, scale, on_grid):
    box = PixelBox([clean_image(seed, on_grid)], eps)
    gen = torch.Generator().manual_seed(seed)
    x = box.random_start(gen)
    assert box.contains(x) and box.linf(x) <= eps + 1e-6
    for _ in range(5):
        x = box.step(x, [torch.randn(x[0].shape, generator=gen) * scale], alpha)
        assert box.contains(x) and float(x[0].min()) >= 0 and float(x[0].max()) <= 1
        assert box.linf(x) <= eps + 1e-6
    q = box.quantize(x)
    assert box.contains(q, tol=1e-6) and box.linf(q) <= eps + 1e-6
    if on_grid:  # 8-bit levels exactly
        assert torch.equal(torch.round(q[0] * 255) / 255, q[0])


def test_projection_is_the_nearest_feasible_point():
    clean = torch.full((3, 2, 2), 0.5)
    box = PixelBox([clean], 0.1)
    (p,) = box.project([torch.tensor([0.0, 0.45, 0.9, 2.0]).reshape(1, 2, 2).expand(3, 2, 2)])
    assert p[0].flatten().tolist() == pytest.approx([0.4, 0.45, 0.6, 0.6])


def test_a_sign_step_moves_every_pixel_against_the_gradient_by_alpha():
    clean = torch.full((3, 2, 2), 0.5)
    box = PixelBox([clean], 0.1)
    grad = torch.tensor([1.0, -2.0, 0.0, 3.0]).reshape(1, 2, 2).expand(3, 2, 2)
    (x,) = box.step([clean], [grad], 0.02)
    assert x[0].flatten().tolist() == pytest.approx([0.48, 0.52, 0.5, 0.48])


def test_random_start_fills_the_ball_and_is_reproducible():
    box = PixelBox([torch.full((3, 16, 16), 0.5)], 16 / 255)
    a = box.random_start(torch.Generator().manual_seed(1))[0]
    b = box.random_start(torch.Generator().manual_seed(1))[0]
    assert torch.equal(a, b) and (a - 0.5).abs().max() > 15 / 255 and (a - 0.5).abs().mean() > 4 / 255


def test_images_must_be_single_tiles_at_model_resolution():
    with pytest.raises(ValueError, match="max_tiles=1"):
        PixelBox([torch.zeros(2, 3, 8, 8)], 0.1)
    with pytest.raises(ValueError, match="at least one image"):
        PixelBox([], 0.1)


def test_png_round_trip_is_lossless(tmp_path):
    box = PixelBox([clean_image(3)], 16 / 255)
    (q,) = box.quantize(box.random_start(torch.Generator().manual_seed(0)))
    path = save_png(q, tmp_path / "s_adv.png")
    back = load_png(path)
    assert back.shape == q.shape and torch.equal(back, q)
