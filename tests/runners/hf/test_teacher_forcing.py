"""Teacher-forced scoring: logits only where needed, equal to a full forward, gradients reaching the pixels."""

from __future__ import annotations

import pytest
import torch
from hf_test_helpers import FAMILIES, image_ref, prompt_of

from facet_probe.runners.hf.teacher_forcing import score_target, target_logprobs, target_positions

PROMPT = prompt_of("Look:", image_ref(40, 40, 1), "and", image_ref(44, 36, 2), "Which is red? A cat B dog")
TARGET = "The answer is (A)."


@pytest.mark.parametrize("family", FAMILIES)
def test_target_logprobs_equal_a_full_forward_and_the_lm_head_sees_only_target_positions(make_runner, family):
    runner = make_runner(family)
    enc = runner.encode(PROMPT, TARGET)
    start, end = enc.target_span
    assert enc.target_ids.tolist() == runner.tokenizer(TARGET, add_special_tokens=False)["input_ids"]
    assert enc.input_ids[:start].tolist() == runner.encode(PROMPT).input_ids.tolist()

    seen = []  # rows the LM head projects, per call
    head = runner.model.get_output_embeddings()
    hook = head.register_forward_hook(lambda m, i, o: seen.append(i[0].numel() // i[0].shape[-1]))
    try:
        with torch.no_grad():
            pixels = runner.pixel_inputs(enc.images01)
            logprobs = target_logprobs(runner, enc, pixels)
            batch = runner._collate([enc], [pixels], prompt_only=False)
            full = runner.model(**batch, use_cache=False).logits[0]
    finally:
        hook.remove()
    assert seen == [end - start, len(enc)]  # ours projected T positions; the reference, all of them
    expected = torch.log_softmax(full[start - 1:end - 1].float(), -1).gather(1, enc.target_ids[:, None])[:, 0]
    torch.testing.assert_close(logprobs, expected, atol=1e-5, rtol=1e-5)
    assert target_positions(enc) == list(range(start - 1, end - 1))


@pytest.mark.parametrize("family", FAMILIES)
def test_gradients_reach_every_image_in_pixel_space(make_runner, family):
    runner = make_runner(family)
    score = score_target(runner, PROMPT, TARGET, grad=True)
    enc = runner.encode(PROMPT)
    assert len(score.pixel_grads) == 2
    for grad, image in zip(score.pixel_grads, enc.images01, strict=True):
        assert grad.shape == image.shape and torch.isfinite(grad).all() and grad.abs().sum() > 0
    assert score.total < 0 and len(score.token_ids) == len(score.logprobs)


@pytest.mark.parametrize("family", ["llava", "qwen3_5", "internvl"])
def test_pixel_gradient_matches_a_finite_difference(make_runner, family):
    runner = make_runner(family)
    enc = runner.encode(PROMPT, TARGET)
    x = [im.clone().requires_grad_(True) for im in enc.images01]

    def f(images):
        return target_logprobs(runner, enc, runner.pixel_inputs(images)).sum()

    (grad,) = torch.autograd.grad(f(x), [x[0]])
    direction = grad.sign()  # the PGD step direction: the first-order change is sum |grad|
    h = 1e-3  # float32 model (norms compute in float32 anyway): a step well above rounding noise
    with torch.no_grad():
        numeric = (f([x[0] + h * direction, x[1]]) - f([x[0] - h * direction, x[1]])) / (2 * h)
    assert float((grad * direction).sum()) == pytest.approx(float(numeric), rel=2e-2)


def test_forward_logits_rejects_positions_outside_the_sequence(make_runner):
    runner = make_runner("llava")
    enc = runner.encode(PROMPT, TARGET)
    with pytest.raises(ValueError, match="positions must be"):
        runner.forward_logits(enc, runner.pixel_inputs(enc.images01), [len(enc)])


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_teacher_forcing_and_generation_equal_one_sample_at_a_time(make_runner, family):
    runner = make_runner(family)
    prompts = [PROMPT, prompt_of("Short?", image_ref(40, 40, 3)), prompt_of("No image at all, A or B?")]
    targets = ["The answer is (A).", "B", "The answer is (B) because"]
    encs = [runner.encode(p, t) for p, t in zip(prompts, targets, strict=True)]
    pixels = [runner.pixel_inputs(e.images01) if e.images01 else {} for e in encs]
    positions = [list(reversed(target_positions(e))) for e in encs]  # any order comes back as asked
    with torch.no_grad():
        batched = runner.forward_logits_batch(encs, pixels, positions)
        single = [runner.forward_logits(e, p, pos) for e, p, pos in zip(encs, pixels, positions, strict=True)]
    for b, s in zip(batched, single, strict=True):
        torch.testing.assert_close(b, s, atol=1e-4, rtol=1e-4)
    texts = runner.generate_texts(encs, pixels, max_new_tokens=5)
    assert texts == [runner.generate_text(e, p, max_new_tokens=5) for e, p in zip(encs, pixels, strict=True)]
