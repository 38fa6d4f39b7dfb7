"""Our processors match the library token-for-token and pixel-for-pixel (the library ones need torchvision).

The library `Qwen3VLProcessor` / `InternVLProcessor` cannot be built without a video processor here, so the
oracle is the library class itself with the video processor taken out of its constructor: its own
placeholder expansion, tokenisation and image processor run unchanged.
"""

from __future__ import annotations

import pytest
import torch
from hf_test_helpers import image_ref, pil, prompt_of
from transformers import AutoImageProcessor, AutoTokenizer, Qwen3VLProcessor
from transformers import InternVLProcessor as LibraryInternVLProcessor

from facet_probe.runners.hf.processors import InternVLProcessor, QwenVLProcessor, expand_placeholders
from facet_probe_dev.testing.tiny_models import tiny_model_path


class QwenOracle(Qwen3VLProcessor):
    """The library Qwen-VL processor without its (torchvision-only) video processor."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, chat_template=chat_template, **kwargs)


class InternVLOracle(LibraryInternVLProcessor):
    """The library InternVL processor without its (torchvision-only) video processor."""

    def __init__(self, image_processor=None, tokenizer=None, image_seq_length=256, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, image_seq_length=image_seq_length,
                         chat_template=chat_template, **kwargs)


def _parts(folder):
    return AutoTokenizer.from_pretrained(folder), AutoImageProcessor.from_pretrained(folder, backend="pil")


SIZES = [(70, 45), (33, 90), (128, 64)]  # odd sizes: every image is really resized


@pytest.mark.parametrize("family", ["qwen3_5", "qwen2_5_vl"])
def test_qwen_pixels_and_tokens_match_the_library_processor(tiny_root, family):
    tok, ip = _parts(tiny_model_path(family, tiny_root))
    ours, oracle = QwenVLProcessor(tok, ip), QwenOracle(ip, tok)
    images = [pil(image_ref(w, h, seed)) for seed, (w, h) in enumerate(SIZES)]
    text = "<|im_start|>user\nfirst <|vision_start|><|image_pad|><|vision_end|> then " \
           "<|vision_start|><|image_pad|><|vision_end|> and <|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
    ids, mm, images01 = ours.encode(text, images)
    ref = oracle(text=[text], images=images, return_tensors="pt")
    assert torch.equal(ids, ref["input_ids"][0])
    assert torch.equal(mm.long(), ref["mm_token_type_ids"][0].long())
    pix = ours.pixel_inputs(images01)
    assert torch.equal(pix["image_grid_thw"], ref["image_grid_thw"])
    torch.testing.assert_close(pix["pixel_values"], ref["pixel_values"].float(), atol=2e-6, rtol=0)
    assert all(x.min() >= 0 and x.max() <= 1 for x in images01)


@pytest.mark.parametrize("max_tiles", [None, 1])
def test_internvl_tiles_and_tokens_match_the_library_processor(tiny_root, max_tiles):
    tok, ip = _parts(tiny_model_path("internvl", tiny_root))
    ours = InternVLProcessor(tok, ip, image_seq_length=4, max_tiles=max_tiles)
    oracle = InternVLOracle(ip, tok, image_seq_length=4)
    images = [pil(image_ref(w, h, seed)) for seed, (w, h) in enumerate(SIZES)]
    text = "<|im_start|>user\na <IMG_CONTEXT>\nb <IMG_CONTEXT>\nc <IMG_CONTEXT>\n<|im_end|>\n"
    ids, images01 = ours.encode(text, images)
    ref = oracle(text=[text], images=images, crop_to_patches=max_tiles is None, return_tensors="pt")
    assert torch.equal(ids, ref["input_ids"][0])
    torch.testing.assert_close(ours.pixel_inputs(images01)["pixel_values"], ref["pixel_values"].float(),
                               atol=2e-6, rtol=0)
    shapes = [tuple(x.shape) for x in images01]
    if max_tiles == 1:
        assert shapes == [(3, 32, 32)] * 3  # one tile per image: one (3, H, W) attack variable each
    else:
        assert any(len(s) == 4 for s in shapes), "the wide images should have been tiled"


@pytest.mark.parametrize("family", ["gemma3", "llava"])
def test_library_processor_families_get_the_library_pixels(make_runner, family):
    runner = make_runner(family)
    refs = [image_ref(w, h, seed) for seed, (w, h) in enumerate(SIZES)]
    prompt = prompt_of("look", refs[0], "and", refs[1], "and", refs[2], "which?")
    enc = runner.encode(prompt)
    messages = runner.chat_messages(prompt)  # the library's own path: apply_chat_template with the images
    images = iter(pil(r) for r in refs)
    for m in messages:
        for c in m["content"] if isinstance(m["content"], list) else []:
            if c["type"] == "image":
                c["image"] = next(images)
    lib = runner.processor.apply_chat_template(messages, chat_template=runner._template, add_generation_prompt=True,
                                               tokenize=True, return_dict=True, return_tensors="pt")
    assert torch.equal(enc.input_ids, lib["input_ids"][0])  # expanded without the processor's own image pass
    assert all(torch.equal(v, lib[k][0]) for k, v in enc.token_fields.items())  # Gemma3's token_type_ids
    torch.testing.assert_close(runner.pixel_inputs(enc.images01)["pixel_values"], lib["pixel_values"].float(),
                               atol=2e-6, rtol=0)


def test_placeholder_count_must_match_the_images():
    assert expand_placeholders("a<i>b<i>c", "<i>", ["1", "22"]) == "a1b22c"
    with pytest.raises(ValueError, match="2 '<i>' placeholders but 1 images"):
        expand_placeholders("a<i>b<i>c", "<i>", ["1"])
