"""Decoding helpers of the HF runners: per-trial seeded sampling and the thinking-trace split."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch

from facet_probe.runners.base import Request


def split_thinking(text: str, open_tag: str, close_tag: str, *, prompt_opened: bool) -> tuple[str, str | None, bool]:
    """Split a decoded reply into (answer, thinking, truncated).

    The trace is what precedes `close_tag` (the template may have emitted `open_tag` in the prompt, so it is
    optional in the reply). A reply whose trace never closes (cut by max_new_tokens) is all thinking, with
    an empty answer and `truncated` True. Replies without tags are all answer.
    """
    if close_tag in text:
        head, tail = text.split(close_tag, 1)
        head = head.split(open_tag, 1)[1] if open_tag in head else head
        return tail.strip(), head.strip(), False
    if open_tag in text:
        before, trace = text.split(open_tag, 1)
        return before.strip(), trace.strip(), True
    if prompt_opened:
        return "", text.strip(), True
    return text.strip(), None, False


class SeededSampler:
    """Sampling with one generator per batch row, seeded by that trial's seed.

    Used as the last logits processor of an otherwise greedy `generate`: it applies temperature, top-k and
    top-p, draws each row's token with the row's own generator and leaves only that token possible. A
    trial's sample therefore depends on its seed alone, not on which other trials share its batch.
    """

    def __init__(self, seeds: Sequence[int], *, temperature: float, top_p: float | None, top_k: int | None,
                 device: torch.device) -> None:
        from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        self.temperature = float(temperature)
        self.warpers = ([TopKLogitsWarper(int(top_k))] if top_k else []) + (
            [TopPLogitsWarper(float(top_p))] if top_p is not None and float(top_p) < 1.0 else [])

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.float() / self.temperature
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        probs = torch.softmax(scores, dim=-1)
        picks = torch.cat([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)])
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, picks[:, None], 0.0)


def request_seed(req: Request) -> int:
    """The trial's sampling seed; a stable one derived from its key when the request has none."""
    if req.seed is not None:
        return int(req.seed)
    return int.from_bytes(hashlib.sha256(req.key.encode()).digest()[:4], "little")
