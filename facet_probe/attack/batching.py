"""Model calls of the attack, batched over samples where the adapter allows it.

The adapters' attack interface is per prompt (`forward_logits(encoded, pixel_inputs, positions)`,
`generate_text(encoded, pixel_inputs, max_new_tokens)`). Attacking samples one at a time leaves a GPU
mostly idle on a 7B model, so `ModelOps` runs one forward (and one `generate`) for several samples:
it left-pads them with the adapter's own collation (`HFRunner._collate`, the same one its batched
generation uses), asks the LM head only for the union of the rows' positions, and splits the logits
back per sample. Left padding keeps every row's target at the end, so the union is about one row's
target long. Positions: RoPE models see a constant shift (attention is unchanged); Qwen-VL builds its
3-D positions from the attention mask. tests/attack/test_batching.py checks batched = one at a time.

When the adapter lacks the private pieces this relies on (`_collate`, `_generation_config`,
`_until_eos`; e.g. a test double), or `batch_size` is 1, it falls back to the public per-prompt calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

log = logging.getLogger("facet_probe.attack")

_PRIVATE = ("_collate", "_generation_config", "_until_eos", "model", "tokenizer")


class ModelOps:
    """Teacher-forced logits and greedy replies for several samples at once (see the module docstring)."""

    def __init__(self, adapter, batch_size: int = 1) -> None:
        self.adapter = adapter
        self.batch_size = max(1, int(batch_size))
        self.batched = self.batch_size > 1 and all(hasattr(adapter, a) for a in _PRIVATE)
        if self.batch_size > 1 and not self.batched:
            log.info("%s: the adapter has no batched collation; samples run one at a time",
                     getattr(adapter, "name", type(adapter).__name__))
        self.generate_calls = 0  # generate() invocations (one per batch)
        self.forward_calls = 0

    # --- teacher-forced logits ----------------------------------------------------------------------
    def forward(self, encodeds: Sequence, pixel_inputs: Sequence[dict], positions: Sequence[Sequence[int]]
                ) -> list[torch.Tensor]:
        """Per sample, logits (len(positions[i]), vocab) at its positions; differentiable in the pixels."""
        out: list[torch.Tensor] = []
        for lo in range(0, len(encodeds), self.batch_size):
            hi = lo + self.batch_size
            out.extend(self._forward_chunk(encodeds[lo:hi], pixel_inputs[lo:hi], positions[lo:hi]))
        return out

    def _forward_chunk(self, encodeds, pixel_inputs, positions) -> list[torch.Tensor]:
        self.forward_calls += 1
        if not self.batched or len(encodeds) == 1:
            return [self.adapter.forward_logits(e, p, pos) for e, p, pos in
                    zip(encodeds, pixel_inputs, positions, strict=True)]
        ad = self.adapter
        batch = ad._collate(list(encodeds), list(pixel_inputs), prompt_only=False)
        width = int(batch["input_ids"].shape[1])
        shifted = [[width - len(e) + int(p) for p in pos] for e, pos in zip(encodeds, positions, strict=True)]
        union = sorted({p for row in shifted for p in row})
        col = {p: i for i, p in enumerate(union)}
        keep = torch.tensor(union, dtype=torch.long, device=batch["input_ids"].device)
        logits = ad.model(**batch, logits_to_keep=keep, use_cache=False).logits
        return [logits[i, [col[p] for p in row]] for i, row in enumerate(shifted)]

    # --- greedy replies -----------------------------------------------------------------------------
    def generate(self, encodeds: Sequence, pixel_inputs: Sequence[dict], max_new_tokens: int) -> list[str]:
        """Greedy replies (new tokens decoded, special tokens removed) for the prompt part of each encoding."""
        out: list[str] = []
        for lo in range(0, len(encodeds), self.batch_size):
            hi = lo + self.batch_size
            out.extend(self._generate_chunk(encodeds[lo:hi], pixel_inputs[lo:hi], max_new_tokens))
        return out

    def _generate_chunk(self, encodeds, pixel_inputs, max_new_tokens: int) -> list[str]:
        self.generate_calls += 1
        ad = self.adapter
        if not self.batched or len(encodeds) == 1:
            return [ad.generate_text(e, p, max_new_tokens) for e, p in zip(encodeds, pixel_inputs, strict=True)]
        batch = ad._collate(list(encodeds), list(pixel_inputs), prompt_only=True)
        cfg = ad._generation_config({**ad.effective_generation(), "temperature": 0.0,
                                     "max_new_tokens": int(max_new_tokens)})
        with torch.no_grad():
            out = ad.model.generate(**batch, generation_config=cfg)
        new = out[:, batch["input_ids"].shape[1]:].cpu()
        return [ad.tokenizer.decode(ad._until_eos(row, cfg), skip_special_tokens=True) for row in new]
