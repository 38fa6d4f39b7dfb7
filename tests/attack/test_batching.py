"""Batched teacher-forced logits and greedy replies equal the adapters' one-prompt-at-a-time calls."""

from __future__ import annotations

import pytest
import torch
from helpers import attack_settings, samples

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.objectives.base import forced_reply


@pytest.mark.parametrize("family", ["llava", "qwen"])
def test_batched_forward_and_generate_equal_single_calls(request, family):
    runner = request.getfixturevalue(family)
    batch = samples(3)
    # replies of different lengths: the rows are left padded by different amounts
    replies = [f"It is {'very ' * i}red. The answer is ({b.gold})." for i, b in enumerate(batch)]
    forced = [forced_reply(runner, b, r) for b, r in zip(batch, replies, strict=True)]
    pixels = [runner.pixel_inputs(f.encoded.images01) for f in forced]
    ops = ModelOps(runner, batch_size=3)
    assert ops.batched
    with torch.no_grad():
        together = ops.forward([f.encoded for f in forced], pixels, [f.positions for f in forced])
        alone = [runner.forward_logits(f.encoded, p, f.positions) for f, p in zip(forced, pixels, strict=True)]
    for a, b in zip(together, alone, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    prompts = [runner.encode(b.prompt) for b in batch]
    pix = [runner.pixel_inputs(e.images01) for e in prompts]
    texts = ops.generate(prompts, pix, 8)
    assert texts == [runner.generate_text(e, p, 8) for e, p in zip(prompts, pix, strict=True)]
    assert ops.generate_calls == 1 and ops.forward_calls == 1


def test_batched_gradients_reach_every_sample(llava):
    batch = samples(2)
    forced = [forced_reply(llava, b, f"Red. The answer is ({b.gold}).") for b in batch]
    xs = [[x.clone().requires_grad_(True) for x in f.encoded.images01] for f in forced]
    logits = ModelOps(llava, 2).forward([f.encoded for f in forced], [llava.pixel_inputs(x) for x in xs],
                                        [f.positions for f in forced])
    sum(lg[f.answer_row, f.answer_ids[b.gold]] for lg, f, b in zip(logits, forced, batch, strict=True)).backward()
    assert all(float(x[0].grad.abs().sum()) > 0 for x in xs)


def test_a_batch_size_of_one_uses_the_public_interface(llava):
    ops = ModelOps(llava, 1)
    assert not ops.batched


@pytest.mark.parametrize("family", ["gemma3", "internvl", "qwen2_5_vl"])
def test_the_other_families_attack_batched(tiny_root, family):

    from facet_probe.attack.pgd import run_pgd
    from facet_probe.runners.hf.gemma3 import Gemma3Runner
    from facet_probe.runners.hf.internvl import InternVLRunner
    from facet_probe.runners.hf.qwen import QwenRunner
    from facet_probe_dev.testing.tiny_models import tiny_model_path

    cls, kw = {"gemma3": (Gemma3Runner, {}), "internvl": (InternVLRunner, {"max_tiles": 1}),
               "qwen2_5_vl": (QwenRunner, {})}[family]
    runner = cls(name=family, model_id="x", local_path=str(tiny_model_path(family, tiny_root)), dtype="float32", **kw)
    runner.check_ready()
    batch = samples(2)
    replies = [f"It is {'very ' * i}red. The answer is ({b.gold})." for i, b in enumerate(batch)]
    forced = [forced_reply(runner, b, r) for b, r in zip(batch, replies, strict=True)]
    pixels = [runner.pixel_inputs(f.encoded.images01) for f in forced]
    with torch.no_grad():
        together = ModelOps(runner, 2).forward([f.encoded for f in forced], pixels, [f.positions for f in forced])
    for f, p, a in zip(forced, pixels, together, strict=True):
        torch.testing.assert_close(a, runner.forward_logits(f.encoded, p, f.positions), atol=1e-4, rtol=1e-4)
    s = attack_settings(name="stop_reasoning", steps=3, update_every=2, early_stop=False)
    results = run_pgd(runner, batch, replies, s.objective, s, ops=ModelOps(runner, 2), max_new_tokens=4)
    for r in results:
        assert r.error is None and r.steps_run == 3 and r.refreshes == 1 and 0 < r.linf <= 16 / 255 + 1e-6
