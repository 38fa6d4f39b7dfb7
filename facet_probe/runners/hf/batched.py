"""The model calls on several encoded samples at once: one right-padded teacher-forced forward (logits only
at each row's positions, differentiable in the pixels) and one left-padded `generate`.

`BatchedCallsMixin` is one role of `HFRunner` (base.py). These are the only model calls: the audit's
generation (generation.py) and the attack (attack/batching.py) both go through `generate_batch` /
`forward_logits_batch`; the one-sample calls are the same with one row.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from facet_probe.runners.hf.decoding import SeededSampler
from facet_probe.runners.hf.encoded import Encoded, Generated, lay_out
from facet_probe.runners.hf.parts import HFParts
from facet_probe.runners.hf.shared_prefixes import Prefilled, collate_after_prefixes


class BatchedCallsMixin(HFParts):
    """Batched teacher forcing and generation over `Encoded` samples (see the module docstring)."""

    def forward_logits(self, encoded: Encoded, pixel_inputs: dict[str, torch.Tensor],
                       positions: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (len(positions), vocab) at `positions` only; differentiable in the pixels."""
        return self.forward_logits_batch([encoded], [pixel_inputs], [positions])[0]

    def forward_logits_batch(self, encoded: Sequence[Encoded], pixel_inputs: Sequence[dict[str, torch.Tensor]],
                             positions: Sequence[Sequence[int] | torch.Tensor]) -> list[torch.Tensor]:
        """`forward_logits` for several samples in one right-padded forward (positions stay unshifted)."""
        self.check_ready()
        batch = self._collate(encoded, pixel_inputs, prompt_only=False, side="right")
        keep = torch.zeros(batch["input_ids"].shape, dtype=torch.bool)
        wanted = []
        for i, (enc, pos) in enumerate(zip(encoded, positions, strict=True)):
            pos = torch.as_tensor(pos, dtype=torch.long).cpu()
            if pos.ndim != 1 or pos.numel() == 0 or int(pos.min()) < 0 or int(pos.max()) >= len(enc):
                raise ValueError(f"positions must be a non-empty 1-D list within [0, {len(enc)})")
            keep[i, pos] = True
            wanted.append(pos)
        # a boolean `logits_to_keep` runs the LM head on the kept positions only, flattened row by row
        logits = self.model(**batch, logits_to_keep=keep.to(self.input_device), use_cache=False).logits
        logits = logits.reshape(-1, logits.shape[-1])
        out, start = [], 0
        for i, pos in enumerate(wanted):
            kept = keep[i].nonzero()[:, 0]  # ascending; map each requested position to its row
            rows = torch.searchsorted(kept, pos) + start
            out.append(logits[rows.to(logits.device)])
            start += kept.numel()
        return out

    def generate_text(self, encoded: Encoded, pixel_inputs: dict[str, torch.Tensor], max_new_tokens: int) -> str:
        """Greedy continuation of the prompt part of `encoded`; the decoded new text."""
        return self.generate_texts([encoded], [pixel_inputs], max_new_tokens)[0]

    def generate_texts(self, encoded: Sequence[Encoded], pixel_inputs: Sequence[dict[str, torch.Tensor]],
                       max_new_tokens: int) -> list[str]:
        """`generate_text` for several samples in one left-padded greedy `generate`."""
        settings = {**self.effective_generation(), "temperature": 0.0, "max_new_tokens": int(max_new_tokens)}
        return [self.tokenizer.decode(g.ids, skip_special_tokens=True)
                for g in self.generate_batch(encoded, pixel_inputs, settings)]

    def generate_batch(self, encoded: Sequence[Encoded], pixel_inputs: Sequence[dict[str, torch.Tensor]],
                       settings: dict[str, Any], seeds: Sequence[int] | None = None,
                       image_features: Any | None = None, prefilled: Prefilled | None = None) -> list[Generated]:
        """One left-padded `generate` over the prompt parts of `encoded` (the audit's and the attack's
        generation): greedy, or with `seeds` each row sampled from its own generator (`SeededSampler`).
        `image_features`: the batch's vision features, given instead of pixels (image_reuse.py); `prefilled`:
        the rows' shared prefixes in a cache, and only the rest is prefilled (prefix_reuse.py)."""
        self.check_ready()
        cfg = self._generation_config(settings)
        extra = {}
        if seeds is not None:
            from transformers import LogitsProcessorList

            extra["logits_processor"] = LogitsProcessorList([SeededSampler(
                list(seeds), temperature=settings["temperature"], top_p=settings.get("top_p"),
                top_k=settings.get("top_k"), device=self.input_device)])
        with torch.inference_mode():  # no autograd bookkeeping at all (no_grad still keeps version counters)
            batch: dict[str, Any] = (self._collate(encoded, pixel_inputs, prompt_only=True) if prefilled is None
                                     else self._collate_after_prefixes(encoded, pixel_inputs, prefilled))
            if image_features is not None:  # transformers' pre-encoded input; only the prefill reads it
                batch["mm_encoder_outputs"] = {"image": image_features}
            out = self.model.generate(**batch, generation_config=cfg, **extra)
        new = out[:, batch["input_ids"].shape[1]:].cpu()
        return [Generated(ids := self._until_eos(row, cfg), len(ids) < row.shape[0], int(row.shape[0]))
                for row in new]

    def _generation_config(self, settings: dict[str, Any]):
        """Greedy decoding settings; sampling (temperature > 0) is added per batch by `SeededSampler`."""
        cfg = copy.deepcopy(self.model.generation_config)
        known = {"max_new_tokens", "temperature", "top_p", "top_k", "repetition_penalty"}
        cfg.update(max_new_tokens=int(settings["max_new_tokens"]), do_sample=False, temperature=None, top_p=None,
                   top_k=None, repetition_penalty=settings.get("repetition_penalty") or 1.0,
                   **{k: v for k, v in settings.items() if k not in known})
        if cfg.pad_token_id is None:
            cfg.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (
                self._eos_ids(cfg) or [0])[0]
        return cfg

    @staticmethod
    def _eos_ids(cfg) -> list[int]:
        eos = cfg.eos_token_id
        return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)

    def _until_eos(self, new: torch.Tensor, cfg) -> list[int]:
        ids = new.tolist()
        eos = set(self._eos_ids(cfg))
        for i, t in enumerate(ids):
            if t in eos:
                return ids[:i]
        return ids

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.model.generation_config.pad_token_id
        if pad is None:
            pad = (self._eos_ids(self.model.generation_config) or [0])[0]
        return int(pad)

    def _model_pixels(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        """Pixel inputs for generation (a family with precomputed pixels overrides this)."""
        return self.pixel_inputs(encoded.images01) if encoded.images01 else {}

    def _collate_after_prefixes(self, encs: Sequence[Encoded], pixels: Sequence[dict[str, torch.Tensor]],
                                prefilled: Prefilled) -> dict[str, Any]:
        """The prompts' rest after their prefilled prefixes (prefix_reuse.py), the gathered cache and the rest's
        pixel inputs: what `generate` takes to go on from the cache."""
        inputs = collate_after_prefixes([e.prompt_only() for e in encs], prefilled.plan, self._pad_id())
        return {**{k: v.to(self.input_device) for k, v in inputs.items()}, "cache": prefilled.cache,
                **self._pixels_of(pixels)}

    def _collate(self, encs: Sequence[Encoded], pixels: Sequence[dict[str, torch.Tensor]], *,
                 prompt_only: bool, side: str = "left") -> dict[str, Any]:
        """Pad token ids, mask and per-token fields (left for generation, right for teacher forcing);
        concatenate pixel inputs in batch order."""
        rows = [e.prompt_only() if prompt_only else e for e in encs]
        width = max(len(e) for e in rows)
        inputs = lay_out([[(e, slice(width - len(e), width) if side == "left" else slice(0, len(e)), slice(None))]
                          for e in rows], width, self._pad_id())
        return {**{k: v.to(self.input_device) for k, v in inputs.items()}, **self._pixels_of(pixels)}

    @staticmethod
    def _pixels_of(pixels: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """The rows' pixel inputs concatenated in batch order, key by key."""
        keys = {k for p in pixels for k in p}
        return {k: torch.cat([p[k] for p in pixels if k in p], dim=0) for k in sorted(keys)}
