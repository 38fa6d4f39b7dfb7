"""FlashAttention-2 / SDPA / eager and NF4 choices: auto falls back with one clear message, require fails clearly."""

from __future__ import annotations

import logging

import pytest
import torch
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.base import Request, RunnerError, generate_all
from facet_probe.runners.hf import base, loading
from facet_probe.runners.hf.fast_paths import resolve_attention, resolve_quantization
from facet_probe.runners.hf.teacher_forcing import score_target

MISSING = "the flash-attn package is not installed"


def test_auto_attention_prefers_flash_then_sdpa_then_eager():
    assert resolve_attention("auto", flash_ok=True, flash_reason="ok") == (["flash_attention_2", "sdpa", "eager"], None)
    order, note = resolve_attention("auto", flash_ok=False, flash_reason=MISSING)
    assert order == ["sdpa", "eager"] and MISSING in note
    assert resolve_attention("off", flash_ok=True, flash_reason="ok") == (["eager"], None)
    assert resolve_attention("sdpa", flash_ok=False, flash_reason=MISSING) == (["sdpa"], None)


@pytest.mark.parametrize("mode", ["require", "flash_attention_2"])
def test_requiring_flash_attention_without_it_raises_one_clear_error(mode):
    with pytest.raises(RunnerError, match="FlashAttention-2|flash_attention_2") as err:
        resolve_attention(mode, flash_ok=False, flash_reason=MISSING)
    assert MISSING in str(err.value) and "attn_implementation=auto" in str(err.value)


def test_unknown_modes_are_rejected():
    with pytest.raises(RunnerError, match="attn_implementation must be"):
        resolve_attention("fast", flash_ok=False, flash_reason=MISSING)
    with pytest.raises(RunnerError, match="quantization must be"):
        resolve_quantization("int3", bnb_ok=True, bnb_reason="")


def test_quantisation_modes():
    assert resolve_quantization("auto", bnb_ok=True, bnb_reason="") == ("nf4", None)
    mode, note = resolve_quantization("auto", bnb_ok=False, bnb_reason="bitsandbytes not installed")
    assert mode == "none" and "unquantised" in note
    assert resolve_quantization("off", bnb_ok=True, bnb_reason="") == ("none", None)
    with pytest.raises(RunnerError, match="bitsandbytes not installed.*quantization=off"):
        resolve_quantization("require", bnb_ok=False, bnb_reason="bitsandbytes not installed")


def test_runner_with_attention_required_on_this_machine_fails_at_check_ready(make_runner):
    with pytest.raises(RunnerError, match="FlashAttention-2"):
        make_runner("llava", fresh=True, attn_implementation="require")


def test_missing_flash_attn_on_a_gpu_box_is_one_warning_and_sdpa(make_runner, monkeypatch, caplog):
    # Pretend CUDA exists for the decision only (the model still loads on the CPU).
    monkeypatch.setattr(loading, "flash_attention_status", lambda: (False, MISSING))
    monkeypatch.setattr(base.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(base.HFRunner, "_device_map", lambda self: ({"": "cpu"}, "cpu"))
    with caplog.at_level(logging.INFO, logger="facet_probe.runners.hf"):
        runner = make_runner("llava", fresh=True)
    notes = [r for r in caplog.records if "FlashAttention-2" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.WARNING and MISSING in notes[0].getMessage()
    assert runner.provenance["attn_implementation"] == "sdpa" and MISSING in runner.provenance["notes"][0]


def test_sdpa_unsupported_falls_back_to_eager_and_says_so(make_runner, monkeypatch):
    from transformers import AutoModelForImageTextToText

    class NoSdpa:
        @staticmethod
        def from_pretrained(folder, attn_implementation, **kwargs):
            if attn_implementation == "sdpa":
                raise ValueError("This model does not support an attention implementation through "
                                 "torch.nn.functional.scaled_dot_product_attention yet.")
            return AutoModelForImageTextToText.from_pretrained(folder, attn_implementation=attn_implementation,
                                                               **kwargs)

    monkeypatch.setattr(base.HFRunner, "_model_loader", lambda self: NoSdpa)
    runner = make_runner("llava", fresh=True)
    assert runner.provenance["attn_implementation"] == "eager"
    assert any("sdpa not supported" in n for n in runner.provenance["notes"])


def test_eager_and_sdpa_give_the_same_greedy_answers(make_runner):
    reqs = [Request(key="a", prompt=prompt_of("Which animal is red?", image_ref(40, 40, 1), "A cat B dog"))]
    eager = generate_all(make_runner("gemma3", attn_implementation="eager"), reqs)["a"]
    sdpa = generate_all(make_runner("gemma3"), reqs)["a"]
    assert eager.provenance["attn_implementation"] == "eager" and eager.text == sdpa.text


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_nf4_loads_generates_and_backpropagates_on_cpu(make_runner):
    import bitsandbytes as bnb

    runner = make_runner("llava", quantization="require", dtype="bfloat16")
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in runner.model.modules())
    prompt = prompt_of("Which animal is red?", image_ref(40, 40, 1), "A cat B dog")
    resp = generate_all(runner, [Request(key="a", prompt=prompt)])["a"]
    assert resp.error is None and resp.provenance["quantization"] == "nf4" and resp.provenance["dtype"] == "bfloat16"
    assert runner.fingerprint()["quantization"] == "nf4"
    score = score_target(runner, prompt, "The answer is (A).", grad=True)
    assert torch.isfinite(score.logprobs).all() and score.pixel_grads[0].abs().sum() > 0
