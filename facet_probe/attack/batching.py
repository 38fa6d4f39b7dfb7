"""The attack's model calls in chunks of `batch_size` samples, through the runner's public batched interface.

A runner of `runners.hf` answers several samples in one call (`forward_logits_batch`: one right-padded
teacher-forced forward, logits only at each row's positions, differentiable in the pixels;
`generate_texts`: one left-padded greedy `generate`); `ModelOps` cuts the attack's samples into chunks of
`batch_size` for them and counts the calls. An adapter without them (a test double) or `batch_size` 1 gets
the per-prompt calls (`forward_logits`, `generate_text`). tests/attack/test_batching.py checks batched = one
at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from facet_probe.runners.base import declared

log = logging.getLogger("facet_probe.attack")

class ModelOps:
    """Teacher-forced logits and greedy replies for several samples at once (see the module docstring)."""

    def __init__(self, adapter, batch_size: int = 1) -> None:
        self.adapter = adapter
        self.batch_size = max(1, int(batch_size))
        self.batched = self.batch_size > 1 and declared(adapter).batched is not None  # `BatchedWhiteBox`
        if self.batch_size > 1 and not self.batched:
            log.info("%s: the adapter has no batched calls; samples run one at a time", adapter.name)
        self.generate_calls = 0  # generate() invocations (one per chunk)
        self.forward_calls = 0

    def _chunks(self, n: int) -> list[slice]:
        return [slice(lo, lo + self.batch_size) for lo in range(0, n, self.batch_size)]

    def forward(self, encodeds: Sequence, pixel_inputs: Sequence[dict], positions: Sequence[Sequence[int]]
                ) -> list[torch.Tensor]:
        """Per sample, logits (len(positions[i]), vocab) at its positions; differentiable in the pixels."""
        out: list[torch.Tensor] = []
        for part in self._chunks(len(encodeds)):
            self.forward_calls += 1
            encs, pix, pos = encodeds[part], pixel_inputs[part], positions[part]
            if self.batched and len(encs) > 1:
                out.extend(self.adapter.forward_logits_batch(list(encs), list(pix), list(pos)))
            else:
                out.extend(self.adapter.forward_logits(e, p, q) for e, p, q in zip(encs, pix, pos, strict=True))
        return out

    def generate(self, encodeds: Sequence, pixel_inputs: Sequence[dict], max_new_tokens: int) -> list[str]:
        """Greedy replies (new tokens decoded, special tokens removed) for the prompt part of each encoding."""
        out: list[str] = []
        for part in self._chunks(len(encodeds)):
            self.generate_calls += 1
            encs, pix = encodeds[part], pixel_inputs[part]
            if self.batched and len(encs) > 1:
                out.extend(self.adapter.generate_texts(list(encs), list(pix), max_new_tokens))
            else:
                out.extend(self.adapter.generate_text(e, p, max_new_tokens) for e, p in zip(encs, pix, strict=True))
        return out
