"""The attack's batched model calls go through the runner's public batched interface, nothing private."""

from __future__ import annotations

import torch
from helpers import samples

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.objectives.base import forced_reply


class PublicOnly:
    """A real runner seen through its public attack interface only (no `_collate`, no `model`)."""

    def __init__(self, runner) -> None:
        self._runner = runner
        self.name = runner.name
        self.calls: list[str] = []

    def __getattr__(self, name):
        if name.startswith("_") or name in ("model", "tokenizer"):
            raise AttributeError(name)
        self.calls.append(name)
        return getattr(self._runner, name)


def test_model_ops_batches_through_the_public_calls(llava):
    batch = samples(3)
    forced = [forced_reply(llava, b, f"It is {'very ' * i}red. The answer is ({b.gold}).") for i, b in enumerate(batch)]
    pixels = [llava.pixel_inputs(f.encoded.images01) for f in forced]
    public = PublicOnly(llava)
    ops = ModelOps(public, batch_size=3)
    assert ops.batched
    public.calls.clear()
    with torch.no_grad():
        together = ops.forward([f.encoded for f in forced], pixels, [f.positions for f in forced])
    texts = ops.generate([f.encoded.prompt_only() for f in forced], pixels, 6)
    assert [c for c in public.calls if c in ("forward_logits_batch", "generate_texts")] == [
        "forward_logits_batch", "generate_texts"]
    for f, p, a in zip(forced, pixels, together, strict=True):
        torch.testing.assert_close(a, llava.forward_logits(f.encoded, p, f.positions), atol=1e-4, rtol=1e-4)
    assert texts == [llava.generate_text(f.encoded, p, 6) for f, p in zip(forced, pixels, strict=True)]
