"""The tiny VLM is a real transformers LLaVA that saves and loads like a hub checkpoint."""

from __future__ import annotations

import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, LlavaForConditionalGeneration

from facet_probe_dev.tiny_vlm.architecture import (
    TinyVLMSpec,
    build_model,
    build_processor,
    count_parameters,
    logits_at,
)
from facet_probe_dev.tiny_vlm.tokenizer import IMAGE_TOKEN, train_tokenizer

SMALL = TinyVLMSpec(vision_hidden=32, vision_layers=1, vision_heads=2, text_hidden=32, text_layers=1,
                    text_heads=2, text_kv_heads=2, text_intermediate=64)


def _tok():
    return train_tokenizer(["What colour is the circle? Answer: A. The answer is (B)."] * 20, vocab_size=300)


def test_builds_llava_with_16_image_tokens_and_a_pixel_gradient(tmp_path):
    tok = _tok()
    model = build_model(SMALL, tok, seed=0)
    assert isinstance(model, LlavaForConditionalGeneration)
    assert model.config.vision_config.image_size == 64 and model.config.vision_config.patch_size == 16
    proc = build_processor(SMALL, tok)
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour is it?"}]}]
    text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    enc = proc(text=[text], images=[Image.new("RGB", (64, 64), (255, 0, 0))], return_tensors="pt")
    n_image = int((enc["input_ids"] == tok.convert_tokens_to_ids(IMAGE_TOKEN)).sum())
    assert n_image == SMALL.image_tokens == 16
    pixels = enc["pixel_values"].clone().requires_grad_(True)
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], pixel_values=pixels)
    out.logits[0, -1].logsumexp(-1).backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0


def test_logits_at_are_the_full_logits_at_the_kept_positions_only():
    tok = _tok()
    model = build_model(SMALL, tok, seed=0).eval()
    ids = torch.tensor(tok(["What colour is the circle? Answer: A.", "The answer is (B). Answer: A."],
                           padding=True)["input_ids"])
    keep = torch.zeros_like(ids, dtype=torch.bool)
    keep[0, 3:6] = keep[1, -2:] = True
    with torch.no_grad():
        full = model(input_ids=ids).logits
        some = logits_at(model, {"input_ids": ids}, keep)
    assert some.shape == (5, full.shape[-1]) and some.dtype == torch.float32
    assert torch.allclose(some, full[keep], atol=1e-5)


def test_save_pretrained_round_trip_with_auto_classes(tmp_path):
    tok = _tok()
    model = build_model(SMALL, tok, seed=0).eval()
    build_processor(SMALL, tok).save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForImageTextToText.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = torch.tensor([[tok.bos_token_id, 5, 6, 7]])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, loaded(input_ids=ids).logits, atol=1e-5)


def test_default_spec_is_small():
    tok = _tok()
    n = count_parameters(build_model(TinyVLMSpec(), tok))
    assert 1_000_000 < n < 4_000_000
