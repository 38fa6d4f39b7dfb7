"""Qwen3.5 thinking on/off through the chat template, and the trace split off the answer."""

from __future__ import annotations

import pytest
import torch
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.base import Request, generate_all
from facet_probe.runners.hf.decoding import split_thinking

PROMPT = prompt_of("Which animal is red?", image_ref(40, 40, 1), "A cat B dog")


@pytest.mark.parametrize(("raw", "opened", "expected"), [
    ("I compare them.</think>\n\nThe answer is (A).", True, ("The answer is (A).", "I compare them.", False)),
    ("<think>\nlook</think>\nB", False, ("B", "look", False)),
    ("still thinking when the budget ran out", True, ("", "still thinking when the budget ran out", True)),
    ("<think>never closed", False, ("", "never closed", True)),
    ("The answer is (C).", False, ("The answer is (C).", None, False)),
])
def test_split_thinking(raw, opened, expected):
    assert split_thinking(raw, "<think>", "</think>", prompt_opened=opened) == expected


def test_thinking_switch_goes_through_the_chat_template_and_the_token_budget(make_runner):
    on, off = make_runner("qwen3_5", thinking=True), make_runner("qwen3_5", thinking=False)
    assert on.render(PROMPT).endswith("<|im_start|>assistant\n<think>\n")
    assert off.render(PROMPT).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on.fingerprint()["chat_template_options"] == {"enable_thinking": True}
    assert on.fingerprint()["generation"]["max_new_tokens"] == 2048  # room for a kept trace
    assert off.fingerprint()["generation"]["max_new_tokens"] == 6


def _reply_with(runner, monkeypatch, reply: str):
    """The model 'generates' `reply` (its real tokens) after the prompt; everything after is the runner's."""
    tail = torch.tensor(runner.tokenizer(reply, add_special_tokens=False)["input_ids"])

    def generate(input_ids, **kwargs):
        return torch.cat([input_ids, tail.expand(input_ids.shape[0], -1)], dim=1)

    monkeypatch.setattr(runner.model, "generate", generate)


def test_the_trace_is_split_off_into_response_thinking(make_runner, monkeypatch):
    runner = make_runner("qwen3_5", thinking=True, thinking_max_new_tokens=512)  # the tiny model has 1,024 positions
    _reply_with(runner, monkeypatch, "I compare the two options.</think>\n\nThe answer is (A).<|im_end|><|endoftext|>")
    resp = generate_all(runner, [Request(key="a", prompt=PROMPT)])["a"]
    assert resp.thinking == "I compare the two options." and resp.text == "The answer is (A)."
    assert resp.provenance["stop_reason"] == "eos" and not resp.provenance["thinking_truncated"]


def test_a_trace_cut_by_the_token_budget_is_all_thinking_and_no_answer(make_runner, monkeypatch):
    runner = make_runner("qwen3_5", thinking=True, thinking_max_new_tokens=512)  # the tiny model has 1,024 positions
    _reply_with(runner, monkeypatch, "I keep comparing the options and")
    resp = generate_all(runner, [Request(key="a", prompt=PROMPT)])["a"]
    assert resp.text == "" and resp.thinking == "I keep comparing the options and"
    assert resp.provenance["thinking_truncated"] and resp.provenance["stop_reason"] == "length"


def test_without_thinking_the_reply_is_all_answer(make_runner, monkeypatch):
    runner = make_runner("qwen3_5", thinking=False)
    _reply_with(runner, monkeypatch, "The answer is (B).<|im_end|>")
    resp = generate_all(runner, [Request(key="a", prompt=PROMPT)])["a"]
    assert resp.text == "The answer is (B)." and resp.thinking is None
