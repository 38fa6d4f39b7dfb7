"""The shared base of the HuggingFace VLM adapters: settings, family hooks, and the parts it is made of.

A family adapter (qwen.py, internvl.py, gemma3.py, llava.py, kimi_vl.py) only says how its processor is
loaded, how a prompt becomes token ids and [0,1] images, and how images become `pixel_values` (the hooks
below). `HFRunner` does the rest, the same way for every family, from one part per role:

* loading.py (`LoadingMixin`): `local_path` or hub `model_id` + `revision` (resolved once to a local
  snapshot, so the commit is known; a folder's files: checkpoint.py), the tokenizer check, `dtype`,
  quantisation `auto|off|require` (bitsandbytes NF4), attention `auto|off|require` or a name (the
  decisions live in fast_paths.py), the device map (placement.py), a PEFT `adapter` (adapters.py);
* provenance.py (`ProvenanceMixin`): the fingerprint that keys stored trials and the provenance record;
* encoding.py (`EncodingMixin`): chat template, token ids, [0,1] images, a target span;
* image_reuse.py (`ImageReuseMixin`): in the audit's generation each distinct image is decoded and resized once
  per window of requests and encoded by the vision tower once, its features reused across the K orderings and
  repeats of an item (`image_features_cache`, the most images whose features are kept; 0: off);
* prefix_reuse.py (`PrefixReuseMixin`): in the audit's generation the prompt prefix that a batch's requests share
  (the K orderings of an item: system prompt, question stem, a figure) is prefilled once (`prefix_reuse`);
* batched.py (`BatchedCallsMixin`): the model calls on several samples (teacher-forced logits, `generate`);
* generation.py (`GenerationMixin`): the `Runner` protocol's generation for the audit: prompts grouped by
  length, left padding, `batch_size` per call, out-of-memory halving (oom.py; a trial that fails even alone
  is an error response, never dropped), greedy unless `temperature > 0` (then each trial samples from its
  own generator seeded by `Request.seed`), a thinking trace split off (decoding.py).

Attack-facing interface (the same methods on every family adapter; the attack suite uses only these):

1. `encode(prompt, target_text=None) -> Encoded`: token ids of the rendered prompt with image placeholders
   expanded, the images resized once to the processor's resolution as [0,1] float tensors (the attack
   variable, one per image in display order, (3, H, W); InternVL with tiling on gives (T, 3, H, W) tiles,
   so attacks build InternVL with `max_tiles=1`), and, given `target_text`, its tokens appended with
   their span recorded in `Encoded.target_span`.
2. `pixel_inputs(images01) -> dict`: the model's pixel inputs computed in torch (normalisation, and Qwen's
   patch flattening + grid_thw), differentiable, equal to the library image processor's `pixel_values`.
3. `forward_logits(encoded, pixel_inputs, positions) -> Tensor (len(positions), vocab)`: one teacher-forced
   forward over the whole sequence, LM-head logits only at `positions` (logits at position p predict token
   p + 1); gradients flow to whatever `pixel_inputs` was computed from.
4. `generate_text(encoded, pixel_inputs, max_new_tokens) -> str`: greedy continuation of the prompt part of
   `encoded`, decoded new tokens only (special tokens removed, thinking trace kept in the text).

`forward_logits_batch` and `generate_texts` do the same for several samples in one call (batched.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from facet_probe.runners.base import BatchedWhiteBox, Rekeying, RunnerError, WhiteBox, plain
from facet_probe.runners.hf.adapters import AdapterSource
from facet_probe.runners.hf.batched import BatchedCallsMixin
from facet_probe.runners.hf.checkpoint import snapshot_commit, weights_digest
from facet_probe.runners.hf.context import ContextCheck
from facet_probe.runners.hf.encoded import Encoded, Generated
from facet_probe.runners.hf.encoding import EncodingMixin, chat_messages
from facet_probe.runners.hf.fast_paths import quantization_status, resolve_quantization
from facet_probe.runners.hf.generation import GenerationMixin, check_generation_keys
from facet_probe.runners.hf.image_reuse import ImageReuseMixin, check_cache_size
from facet_probe.runners.hf.loading import DTYPES, LoadingMixin
from facet_probe.runners.hf.oom import BatchLimit
from facet_probe.runners.hf.placement import placement_config
from facet_probe.runners.hf.prefix_reuse import PrefixReuseMixin
from facet_probe.runners.hf.provenance import ProvenanceMixin

#: kept importable from here for the subclasses, the vLLM runner and the tiny VLM's data
__all__ = ["DTYPES", "Encoded", "Generated", "HFRunner", "chat_messages", "check_generation_keys", "snapshot_commit",
           "weights_digest"]


class HFRunner(LoadingMixin, ProvenanceMixin, EncodingMixin, ImageReuseMixin, PrefixReuseMixin, BatchedCallsMixin,
               GenerationMixin, Rekeying, WhiteBox, BatchedWhiteBox):
    """A local HuggingFace VLM behind the `Runner` protocol, plus the attack-facing interface (the optional
    capabilities it declares: `Rekeying` its older fingerprints, `WhiteBox` and `BatchedWhiteBox` for attacks)."""

    family: ClassVar[str] = "hf"
    #: the `model_type`s of config.json this adapter runs, declared on its own class: `model=hf` picks the adapter
    #: by them (families.py)
    model_types: ClassVar[tuple[str, ...]] = ()
    image_placeholder: ClassVar[str] = "<image>"  # what the chat template emits for one image
    think_tags: ClassVar[tuple[str, str] | None] = None  # (open, close) when the family emits a trace
    #: the text that closes an assistant turn in the family's conversation format, i.e. what a reply ends with
    #: (the stop-reasoning template's last token(s)); None: the model's first generation EOS. A class attribute;
    #: a family whose format is a setting sets it per runner (blip2.py)
    end_of_turn: str | None = None
    trust_remote_code: ClassVar[bool] = False
    untested_offline: ClassVar[bool] = False  # True where no offline model exercises the adapter (Kimi-VL)

    def __init__(self, *, name: str, model_id: str, revision: str | None = None, local_path: str | None = None,
                 generation: dict[str, Any] | None = None, dtype: str = "bfloat16", quantization: str = "off",
                 attn_implementation: str = "auto", batch_size: int = 8, device: str = "auto",
                 chat_template: str | None = None, image_processor_kwargs: dict[str, Any] | None = None,
                 context_check: ContextCheck | str = ContextCheck.LABEL,
                 placement: dict[str, Any] | None = None, adapter: str | None = None,
                 adapter_revision: str | None = None, image_features_cache: int = 128,
                 prefix_reuse: bool = True) -> None:
        generation, image_processor_kwargs = plain(generation), plain(image_processor_kwargs)
        self.name = name
        self.model_id = model_id
        self.revision = revision
        self.local_path = local_path
        self.adapter = str(adapter) if adapter else None  # a PEFT adapter folder or hub id (adapters.py)
        self.adapter_revision = adapter_revision
        self.adapter_source: AdapterSource | None = None  # what it resolved to, once loaded
        check_generation_keys(name, generation or {})
        self.generation = {"max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0, "top_k": None,
                           "repetition_penalty": 1.0, **dict(generation or {})}
        if float(self.generation["temperature"]) < 0:
            raise ValueError("generation.temperature must be >= 0")
        if dtype != "auto" and dtype not in DTYPES:
            raise ValueError(f"dtype must be auto or one of {sorted(DTYPES)}; got {dtype!r}")
        if int(batch_size) < 1:
            raise ValueError("batch_size must be >= 1")
        self.dtype = dtype
        self.quantization = quantization
        self.attn_implementation = attn_implementation
        self.batch_size = int(batch_size)
        self.device = device
        self.chat_template = chat_template
        self.image_processor_kwargs = dict(image_processor_kwargs or {})
        self.placement_config = placement_config(name, plain(placement))  # GPUs: one where it fits (placement.py)
        self.placement: dict[str, Any] | None = None  # the decision, once loaded on CUDA (provenance)
        try:
            self.context_check = ContextCheck(context_check)
        except ValueError:
            raise ValueError(f"context_check must be one of {[c.value for c in ContextCheck]}; got {context_check!r}") from None
        bnb_ok, bnb_reason = quantization_status()
        try:  # resolved now (it only depends on installed packages) so the fingerprint names what runs
            self.quantization_used, self._quant_note = resolve_quantization(quantization, bnb_ok=bnb_ok,
                                                                            bnb_reason=bnb_reason)
            self._setup_error: RunnerError | None = None
        except RunnerError as exc:
            self.quantization_used, self._quant_note, self._setup_error = "unavailable", None, exc
        self.model = None
        self.tokenizer = None
        self.processor = None
        self.folder: Path | None = None
        self.weights: str | None = None  # `weights_id()`, once loaded
        self.provenance: dict[str, Any] = {}
        self._template: str | None = None
        self.batch_limit = BatchLimit(self.batch_size)  # lowered by out of memory, kept across calls (oom.py)
        self.image_features_cache = check_cache_size(name, image_features_cache)  # images; 0: off (image_reuse.py)
        if not isinstance(prefix_reuse, bool):
            raise ValueError(f"{name}: prefix_reuse is true (each prompt prefix that requests share is prefilled "
                             f"once) or false; got {prefix_reuse!r}")
        self.prefix_reuse = prefix_reuse

    # --- family hooks ---------------------------------------------------------------------------------
    def _load_processor(self, folder: Path) -> None:
        """Set `self.tokenizer` and whatever the family needs to encode prompts."""
        raise NotImplementedError

    def prepare_image(self, image) -> Any:
        """One decoded RGB PIL image -> what `_tokenize` takes for it: the image resized by the family's image
        processor as a [0,1] tensor (the PIL image itself by default). Once per distinct image per window."""
        return image

    def _tokenize(self, text: str, images: list) -> tuple:
        """Rendered text + prepared images (`prepare_image`) -> (input_ids (L,), per-token fields, images01
        [, extras])."""
        raise NotImplementedError

    def image_tokens(self, image01: torch.Tensor) -> int | None:
        """The image tokens one prepared image becomes in the input ids (None: the family cannot say, and its
        vision features are not reused: image_reuse.py)."""
        return None

    def image_side_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """What the model's forward needs for these images besides their pixels once their features are given
        (Qwen's `image_grid_thw`, for its positions); nothing by default."""
        return {}

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """[0,1] images -> the model's pixel keyword arguments, differentiably (see module docstring)."""
        raise NotImplementedError

    def chat_template_options(self) -> dict[str, Any]:
        """Extra keyword arguments for the chat template (e.g. Qwen's enable_thinking)."""
        return {}

    def effective_generation(self) -> dict[str, Any]:
        """The generation settings actually used (a family may adjust, e.g. Qwen thinking budget)."""
        return dict(self.generation)

    def _family_settings(self) -> dict[str, Any]:
        """Family keys that change outputs (recorded in the fingerprint)."""
        return {}

    def _fallback_template(self) -> str | None:
        """An order-preserving template to use when the checkpoint's reorders images (None: refuse)."""
        return None

    def _model_loader(self):
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText

    @classmethod
    def attack_config_errors(cls, node: Any) -> list[str]:
        """What in the model config `node` an attack cannot run with (one message each); none by default.
        A family overrides it (e.g. InternVL's tiling, Qwen's thinking) instead of the attack app testing
        the class."""
        return []
