"""Teacher-forced scoring of a target continuation: prompt + target -> per-token log-probs (and pixel gradients).

Built only on the runner's public attack interface (`encode`, `pixel_inputs`, `forward_logits`), the calls
the attack makes too; the attack builds its own forced sequences (attack/objectives/base.py) and shares no
code with this module. One forward over prompt + target; the LM head runs only at the positions that
predict target tokens, so no full-vocabulary logits are built for the prompt. Gradients reach the [0,1]
pixel tensors whenever they require grad.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from facet_probe.core.prompts import Prompt
from facet_probe.runners.hf.base import Encoded, HFRunner


@dataclass
class TargetScore:
    """Per-token log-probabilities of a target continuation, and the pixel gradients when asked."""

    token_ids: list[int]
    logprobs: torch.Tensor  # (T,): log p(target_t | prompt, target_<t)
    pixel_grads: list[torch.Tensor] | None = None  # d(sum logprobs) / d images01, one per image

    @property
    def total(self) -> float:
        return float(self.logprobs.detach().sum())


def target_positions(encoded: Encoded) -> list[int]:
    """Positions whose logits predict the target tokens (one before each target token)."""
    if encoded.target_span is None:
        raise ValueError("encode the prompt with a target_text first")
    start, end = encoded.target_span
    return list(range(start - 1, end - 1))


def target_logits(adapter: HFRunner, encoded: Encoded, pixel_inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(T, vocab) logits predicting each target token, teacher forced."""
    return adapter.forward_logits(encoded, pixel_inputs, target_positions(encoded))


def target_logprobs(adapter: HFRunner, encoded: Encoded, pixel_inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(T,) log-probabilities of the target tokens; differentiable in the pixels."""
    logits = target_logits(adapter, encoded, pixel_inputs)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    ids = encoded.target_ids.to(logits.device)
    return torch.log_softmax(logits, dim=-1).gather(1, ids[:, None])[:, 0]


def score_target(adapter: HFRunner, prompt: Prompt, target_text: str, *, grad: bool = False) -> TargetScore:
    """Score `target_text` as the reply to `prompt`; with `grad`, also d(total log-prob)/d(each [0,1] image)."""
    enc = adapter.encode(prompt, target_text)
    images = [x.clone().requires_grad_(grad) for x in enc.images01]
    with torch.set_grad_enabled(grad):
        pixels = adapter.pixel_inputs(images) if images else {}
        logprobs = target_logprobs(adapter, enc, pixels)
        grads = None
        if grad and images:
            grads = list(torch.autograd.grad(logprobs.sum(), images))
    return TargetScore(enc.target_ids.tolist(), logprobs.detach(), grads)
