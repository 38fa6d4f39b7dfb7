"""Each prompt prefix that several requests of a batch share is prefilled once.

The K orderings of an item share everything before the first unit their facet moves: the system prompt, the
instructions, the question stem, a figure shown before the options. `generate` would prefill that prefix once
per ordering. Here the batch's distinct shared prefixes (found by shared_prefixes.py) go through the model once
(one right-padded forward), their key/value cache rows are gathered per request, and `generate` prefills only
each request's own rest:

    row i:  [ prefix_i | padding ][ padding | rest_i ] + new tokens

The padding is masked and the positions come from the attention mask (transformers' `generate` restarting from
a cache), so each token sees the same keys at the same positions as in one long prompt. A prefix may include
images where their vision features are given pre-encoded (image_reuse.py): an image token is known by the image
it belongs to, so two different images never count as a shared prefix, and a prefix never ends inside an image.
Without pre-encoded features a prefix stops at the first image.

`PrefixReuseMixin` is one role of `HFRunner` (base.py). Only the audit's generation uses it; the attack's calls
and teacher forcing do not. A family turns it on with `prefills_shared_prefixes` where its tiny copy gives the
same replies with and without it (tests/runners/hf/test_prefix_reuse.py): families with 1-D positions and a
plain key/value cache (LLaVA, InternVL). `prefix_reuse=false` turns it off.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from facet_probe.runners.base import Request
from facet_probe.runners.hf.encoded import Encoded
from facet_probe.runners.hf.oom import is_oom
from facet_probe.runners.hf.parts import HFParts
from facet_probe.runners.hf.shared_prefixes import (
    ImageNames,
    Prefilled,
    PrefixPlan,
    collate_prefixes,
    content_ids,
    plan_prefixes,
    prefix_limits,
)

log = logging.getLogger("facet_probe.runners.hf")

#: a batch whose shared prefixes would save fewer prompt tokens than this is generated as it is: the prefixes'
#: own forward costs a model call
MIN_TOKENS_SAVED = 32


class PrefixReuseMixin(HFParts):
    """The batch's shared prefixes prefilled once (see the module docstring)."""

    #: set by a family whose replies are the same with and without (its positions are 1-D, its cache plain)
    prefills_shared_prefixes: ClassVar[bool] = False
    _prefix_off: str | None = None  # why this runner stopped prefilling prefixes (set once, logged once)

    def plan_shared_prefixes(self, batch: Sequence[tuple[Request, Encoded]], image_features: dict | None
                             ) -> PrefixPlan | None:
        """The batch's shared prefixes, or None where none is worth a forward of its own. `image_features`: the
        batch's pre-encoded features by image key (images may then lie inside a prefix), or None."""
        if not self._reusing_prefixes() or len(batch) < 2:
            return None
        contents = self._contents(batch)
        plan = plan_prefixes(contents, prefix_limits(contents, images_allowed=image_features is not None))
        return plan if plan and plan.tokens_saved([len(c) for c in contents]) >= MIN_TOKENS_SAVED else None

    def _reusing_prefixes(self) -> bool:
        return self.prefix_reuse and self.prefills_shared_prefixes and not self._prefix_off

    def _contents(self, rows: Sequence[tuple[Request, Encoded]]) -> list[list[int]]:
        """Each row's prompt as `content_ids`, its images named alike across the rows."""
        token, names = self.image_token_id(), ImageNames()
        contents = []
        for req, enc in rows:
            images = [(self.image_key(ref), self.image_tokens(x) or 0)
                      for ref, x in zip(req.prompt.images(), enc.images01, strict=False)]
            contents.append(content_ids(enc.prompt_only().input_ids.tolist(), token, images, names))
        return contents

    def prefill_prefixes(self, batch: Sequence[tuple[Request, Encoded]], plan: PrefixPlan,
                         image_features: dict | None) -> Prefilled | None:
        """One forward over the distinct prefixes; its cache gathered to one row per request. None, and the reuse
        turned off with one log line, where the forward fails for another reason than memory (that one halves
        the batch: oom.py) or the model's cache cannot be gathered."""
        rows = [e.prompt_only() for _, e in batch]
        inputs: dict[str, Any] = {k: v.to(self.input_device) for k, v in
                                  collate_prefixes(rows, plan, self._pad_id()).items()}
        keys = [self.image_key(ref) for s in plan.sources for ref in batch[s][0].prompt.images()[:plan.images[s]]]
        if keys and image_features is not None:  # a prefix holds images only where their features are given
            inputs["mm_encoder_outputs"] = {"image": self._features_output(torch.cat([image_features[k]
                                                                                      for k in keys]))}
        try:
            with torch.inference_mode():  # as `generate_batch`, which reads this cache
                out = self.model(**inputs, use_cache=True, logits_to_keep=1)
        except Exception as exc:
            self.prefix_failed(exc)
            return None
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        layers = getattr(cache, "layers", None)
        if cache is None or not layers or any(getattr(layer, "is_sliding", True)
                                              or not hasattr(layer, "batch_select_indices") for layer in layers):
            self._turn_prefix_off(f"its cache ({type(cache).__name__}) is not one plain key/value cache per layer")
            return None
        cache.batch_select_indices(torch.tensor(plan.prefix_of))  # CPU indices: each layer's cache on its device
        return Prefilled(plan, cache)

    def prefix_failed(self, exc: Exception) -> None:
        """A call with shared prefixes failed: out of memory is raised again (the batch is halved: oom.py); any
        other failure turns the reuse off, said once, and the caller prefills each prompt whole."""
        if is_oom(exc):
            raise exc
        self._turn_prefix_off(f"generating from shared prefixes failed: {type(exc).__name__}: {exc}")

    def _turn_prefix_off(self, why: str) -> None:
        self._prefix_off = why
        log.warning("%s: each prompt is prefilled whole from now on (%s)", self.name, why)
