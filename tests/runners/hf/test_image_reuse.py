"""Each distinct image is decoded once per window and encoded by the vision tower once, and the replies are the
same as when every prompt's images go through the tower (image_reuse.py)."""

from __future__ import annotations

import pytest
from hf_test_helpers import image_ref, prompt_of

from facet_probe.core.items import ImageRef
from facet_probe.runners.base import Request, generate_all
from facet_probe.runners.hf.context import ContextCheck
from facet_probe.runners.hf.image_reuse import LRU, check_cache_size

A, B, C = image_ref(50, 40, 11), image_ref(64, 30, 12), image_ref(36, 52, 13)
REUSING = ["llava", "qwen3_5", "qwen2_5_vl", "gemma3", "internvl"]


def orderings() -> list[Request]:
    """Three orderings of a three-image item, three of a one-image item, and a text-only prompt: 12 images
    shown, 3 distinct."""
    prompts = []
    for x, y, z in [(A, B, C), (C, A, B), (B, C, A)]:
        prompts += [prompt_of("first", x, "second", y, "third", z, "Which image shows a dog? A B C"),
                    prompt_of("Which animal is red?", x, "A cat B dog")]
    prompts.append(prompt_of("No image here: yes or no?"))
    return [Request(key=f"r{i}", prompt=p) for i, p in enumerate(prompts)]


def images_through_the_tower(runner, monkeypatch) -> list[int]:
    """A list that grows by the number of images each `pixel_inputs` call prepares for the vision tower."""
    seen: list[int] = []
    original = runner.pixel_inputs

    def spy(images01):
        seen.append(len(images01))
        return original(images01)

    monkeypatch.setattr(runner, "pixel_inputs", spy)
    return seen


@pytest.mark.parametrize("family", REUSING)
def test_each_image_meets_the_vision_tower_once_and_the_replies_are_the_same(make_runner, family, monkeypatch):
    runner = make_runner(family)
    runner.forget_images()  # the runner is shared: start from an empty cache
    seen = images_through_the_tower(runner, monkeypatch)
    cached = {k: r.text for k, r in generate_all(runner, orderings()).items()}
    assert sum(seen) == 3  # A, B and C, once each, for all the orderings
    seen.clear()
    monkeypatch.setattr(runner, "image_features_cache", 0)  # the switch: every prompt's images through the tower
    uncached = {k: r.text for k, r in generate_all(runner, orderings()).items()}
    assert sum(seen) == 12
    assert cached == uncached


def test_llava_vision_tower_sees_each_distinct_image_once(make_runner, monkeypatch):
    runner = make_runner("llava")
    runner.forget_images()
    rows: list[int] = []
    hook = runner.model.model.vision_tower.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[0]))
    try:
        first = {k: r.text for k, r in generate_all(runner, orderings()).items()}
        assert sum(rows) == 3
        again = {k: r.text for k, r in generate_all(runner, orderings()).items()}
        assert sum(rows) == 3  # all three kept: the tower is not called again
        monkeypatch.setattr(runner, "image_features_cache", 1)  # fewer kept than a batch shows
        small = {k: r.text for k, r in generate_all(runner, orderings()).items()}
    finally:
        hook.remove()
    assert first == again == small


def test_each_image_is_decoded_once_per_window(make_runner, monkeypatch):
    runner = make_runner("llava")
    decoded: list[str] = []
    original = ImageRef.to_pil

    def spy(ref):
        decoded.append(ref.sha256)
        return original(ref)

    monkeypatch.setattr(ImageRef, "to_pil", spy)
    distinct = sorted({A.sha256, B.sha256, C.sha256})
    generate_all(runner, orderings())  # the context check's encodings are the window's
    assert sorted(decoded) == distinct
    decoded.clear()
    monkeypatch.setattr(runner, "context_check", ContextCheck.OFF)  # the window encodes every prompt itself
    generate_all(runner, orderings())
    assert sorted(decoded) == distinct


def test_llava_expands_its_image_tokens_without_a_second_image_pass(make_runner, monkeypatch):
    runner = make_runner("llava")
    ip = runner.processor.image_processor
    calls: list[int] = []
    original = ip.preprocess
    monkeypatch.setattr(ip, "preprocess",
                        lambda images, *a, **k: calls.append(len(images)) or original(images, *a, **k))
    enc = runner.encode(prompt_of("look", A, "and", B, "and", C, "which?"))
    assert sum(calls) == 3  # one resize per image; the processor's own pixel pass is not run
    assert runner.image_token_counts(enc) == [runner.image_tokens(x) for x in enc.images01]


def test_the_cache_keeps_the_most_recently_used_images():
    cache = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2


@pytest.mark.parametrize("bad", [-1, True, 2.5, "128"])
def test_the_cache_size_is_a_whole_number_of_images(bad):
    assert check_cache_size("m", 0) == 0 and check_cache_size("m", 64) == 64
    with pytest.raises(ValueError, match=r"m: image_features_cache is the number of images .* got"):
        check_cache_size("m", bad)
