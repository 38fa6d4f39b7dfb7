"""The `Runner` protocol's generation for the audit: prompts encoded and checked against the context,
grouped by length, batched with out-of-memory halving (oom.py), every trial answered (an error response,
never dropped), greedy or seeded sampling per trial, a thinking trace split off, provenance on every response.

`GenerationMixin` is one role of `HFRunner` (base.py).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator, Sequence
from typing import Any

from facet_probe.runners.base import Request, Response, RunnerError
from facet_probe.runners.hf.context import (
    ContextCheck,
    Fit,
    HFFailureKind,
    cell_overflow_message,
    context_limit,
    most_do_not_fit,
)
from facet_probe.runners.hf.decoding import request_seed, split_thinking
from facet_probe.runners.hf.encoded import Encoded, Generated
from facet_probe.runners.hf.oom import is_oom, run_halving
from facet_probe.runners.hf.parts import HFParts
from facet_probe.runners.hf.shared_prefixes import Prefilled


def check_generation_keys(model: str, settings: dict[str, Any]) -> None:
    """Refuse generation keys that transformers' `GenerationConfig` does not have: `GenerationConfig.update`
    would drop a misspelt one silently, and the run would decode with the default."""
    from transformers import GenerationConfig

    known = set(GenerationConfig().to_dict())
    unknown = sorted(k for k in settings if k not in known)
    if unknown:
        close = {k: difflib.get_close_matches(k, known, n=1) for k in unknown}
        hint = "; ".join(f"{k!r} (did you mean {m[0]!r}?)" if m else repr(k) for k, m in close.items())
        raise ValueError(f"unknown generation setting {hint} for {model}; transformers' GenerationConfig "
                         "takes e.g. max_new_tokens, temperature, top_p, top_k, repetition_penalty")


class GenerationMixin(HFParts):
    """Requests -> responses, batched (see the module docstring)."""

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        """Answer every request, batched; yield each batch's responses as soon as it completes."""
        self.check_ready()
        requests = list(requests)
        checked = self.check_cells_fit(requests) if self.context_check == ContextCheck.LABEL else {}
        window = max(32, 8 * self.batch_size)  # bounds memory held by encoded images
        for start in range(0, len(requests), window):
            yield from self._generate_window(requests[start:start + window], checked)

    def check_cells_fit(self, requests: Sequence[Request], sample: int = 16) -> dict[str, Encoded]:
        """Encode up to `sample` prompts of each cell (`Request.metadata["cell"]`, else one cell) and stop with
        a `RunnerError` naming what to change when most of them cannot fit the context; else return those
        encodings by request key (the windows use them rather than encode again)."""
        cells: dict[str, list[Request]] = {}
        for req in requests:
            group = cells.setdefault(str(req.metadata.get("cell", "(all)")), [])
            if len(group) < sample:
                group.append(req)
        encoded: dict[str, Encoded] = {}
        images: dict = {}  # each image decoded once (image_reuse.py)
        for cell, reqs in cells.items():
            fits = []
            for req in reqs:
                try:
                    encoded[req.key] = self.encode(req.prompt, images=self.prepared_images(req.prompt.images(), images))
                except Exception:  # an encoding failure is labelled per trial later
                    continue
                fits.append(self.fit_of(encoded[req.key]))
            if most_do_not_fit(fits):
                raise RunnerError(cell_overflow_message(self.name, cell, fits, self._context_hints()))
        return encoded

    def fit_of(self, encoded: Encoded) -> Fit:
        """The prompt's tokens (text + image) and the generation budget against the model's positions."""
        return Fit(len(encoded), sum(self.image_token_counts(encoded)),
                   int(self.effective_generation()["max_new_tokens"]), context_limit(self.model.config))

    def _context_hints(self) -> list[str]:
        """What shrinks this family's prompts (e.g. fewer tiles per image); the base knows none."""
        return []

    def _sampling(self) -> bool:
        return float(self.effective_generation().get("temperature") or 0.0) > 0

    def _generate_window(self, requests: list[Request], checked: dict[str, Encoded]
                         ) -> Iterator[tuple[Request, Response]]:
        ready: list[tuple[Request, Encoded]] = []
        images: dict = {}  # each distinct image of the window decoded and prepared once (image_reuse.py)
        for req in requests:
            try:
                enc = checked.pop(req.key, None)
                if enc is None:
                    enc = self.encode(req.prompt, images=self.prepared_images(req.prompt.images(), images))
            except Exception as exc:
                yield req, self._error(req, f"{HFFailureKind.ENCODE}: cannot encode the prompt: "
                                            f"{type(exc).__name__}: {exc}")
                continue
            fit = self.fit_of(enc)
            if fit.fits or self.context_check == ContextCheck.OFF:
                ready.append((req, enc))
            else:
                yield req, self._error(req, fit.reason(), {**self.image_record(enc), "prompt_tokens": len(enc)})
        ready.sort(key=lambda it: -len(it[1]))  # similar lengths share a batch; longest first (OOM shows early)
        for _, pairs in run_halving(ready, self.batch_limit, lambda batch: list(self._run_batch(batch)),
                                    alone=self._failed_alone, isolate_errors=True, label=self.name):
            yield from pairs

    def _failed_alone(self, batch: list[tuple[Request, Encoded]], exc: BaseException) -> list[tuple[Request, Response]]:
        """The error response of a trial that fails even in a batch of one (never dropped)."""
        req, enc = batch[0]
        what = (f"{HFFailureKind.OUT_OF_MEMORY}: out of memory even at batch size 1" if is_oom(exc)
                else f"{HFFailureKind.GENERATION}: generation failed")
        return [(req, self._error(req, f"{what} ({len(enc)} prompt tokens): {type(exc).__name__}: {exc}"))]

    def _run_batch(self, batch: list[tuple[Request, Encoded]]) -> Iterator[tuple[Request, Response]]:
        settings = self.effective_generation()
        seeds = [request_seed(req) for req, _ in batch] if self._sampling() else None
        t0 = time.perf_counter()
        features = self.batch_image_features(batch)  # cached vision features where the family takes them
        plan = self.plan_shared_prefixes(batch, features)  # each shared prefix prefilled once (prefix_reuse.py)
        prefilled = self.prefill_prefixes(batch, plan, features) if plan else None
        try:
            generated = self._generate_rows(batch, settings, seeds, features, prefilled)
        except Exception as exc:
            if prefilled is None or is_oom(exc):  # out of memory halves the batch (oom.py)
                raise
            generated = self._generate_rows(batch, settings, seeds, features, None)  # a failure of its own: raised
            self.prefix_failed(exc)  # whole prompts ran where the prefixes failed: whole prompts from now on
            prefilled = None
        latency = time.perf_counter() - t0
        results = []
        for i, ((req, enc), gen) in enumerate(zip(batch, generated, strict=True)):
            raw = self.tokenizer.decode(gen.ids, skip_special_tokens=True)
            text, thinking, truncated = raw.strip(), None, False
            if self.think_tags is not None:
                opened = enc.text.rstrip().endswith(self.think_tags[0])
                text, thinking, truncated = split_thinking(raw, *self.think_tags, prompt_opened=opened)
            prov = {**self.provenance, "batch_size": len(batch), "seed": request_seed(req) if seeds else None,
                    "stop_reason": "eos" if gen.stopped else "length", "thinking_truncated": truncated,
                    "generation": settings, "image_sha256": [ref.sha256 for ref in req.prompt.images()],
                    "shared_prefix_tokens": prefilled.plan.lengths[i] if prefilled else 0,
                    **self.image_record(enc)}
            results.append((req, Response(text=text, thinking=thinking, latency_s=latency, provenance=prov,
                                          usage={"prompt_tokens": enc.prompt_len,
                                                 "completion_tokens": min(len(gen.ids) + 1, gen.width)})))
        yield from results

    def _generate_rows(self, batch: list[tuple[Request, Encoded]], settings: dict[str, Any],
                       seeds: list[int] | None, features: dict | None, prefilled: Prefilled | None) -> list[Generated]:
        """`generate_batch` on the batch: each row's images (those after its prefilled prefix) as features or
        pixels, and the prefixes' cache where there is one."""
        pixels, mm_features = self.batch_image_inputs(batch, features, prefilled.plan.images if prefilled else None)
        return self.generate_batch([e for _, e in batch], pixels, settings, seeds, image_features=mm_features,
                                   prefilled=prefilled)

    def _error(self, req: Request, message: str, extra: dict[str, Any] | None = None) -> Response:
        return Response(text="", error=message, provenance={
            **self.provenance, "image_sha256": [r.sha256 for r in req.prompt.images()], **(extra or {})})
