"""What the parts of `HFRunner` (its mixins: loading, provenance, encoding, image_reuse, prefix_reuse, batched,
generation) read of
one another: the settings and loaded objects `HFRunner.__init__` sets, the family hooks (base.py) and the methods
one part calls on another.

Declared once, in the class `HFParts` every part derives from, so that the type checker holds each part to it; at
run time it holds nothing but annotations (the methods are declared for the type checker only).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch

    from facet_probe.core.items import ImageRef
    from facet_probe.core.prompts import Prompt
    from facet_probe.runners.base import Request, RunnerError
    from facet_probe.runners.hf.adapters import AdapterSource
    from facet_probe.runners.hf.context import ContextCheck
    from facet_probe.runners.hf.encoded import Encoded, Generated
    from facet_probe.runners.hf.oom import BatchLimit
    from facet_probe.runners.hf.placement import PlacementConfig
    from facet_probe.runners.hf.shared_prefixes import Prefilled, PrefixPlan


class HFParts:
    """The shared state and methods of an HF runner's parts (see the module docstring)."""

    # the family's class settings (base.py)
    family: ClassVar[str]
    image_placeholder: ClassVar[str]
    think_tags: ClassVar[tuple[str, str] | None]
    trust_remote_code: ClassVar[bool]

    # the settings (`HFRunner.__init__`)
    name: str
    model_id: str
    revision: str | None
    local_path: str | None
    adapter: str | None
    adapter_revision: str | None
    generation: dict[str, Any]
    dtype: str
    attn_implementation: str
    batch_size: int
    device: str
    chat_template: str | None
    image_processor_kwargs: dict[str, Any]
    placement_config: PlacementConfig
    context_check: ContextCheck
    quantization_used: str
    _quant_note: str | None
    _setup_error: RunnerError | None
    batch_limit: BatchLimit
    image_features_cache: int
    prefix_reuse: bool

    # what loading sets (`check_ready`); transformers' objects are untyped
    model: Any
    tokenizer: Any
    processor: Any
    folder: Path | None
    weights: str | None
    adapter_source: AdapterSource | None
    placement: dict[str, Any] | None
    provenance: dict[str, Any]
    _template: str | None
    _template_label: str

    if TYPE_CHECKING:  # declared for the type checker only: at run time the parts' own methods are all there is
        # the family hooks (base.py documents each)
        def _load_processor(self, folder: Path) -> None: ...

        def prepare_image(self, image: Any) -> Any: ...

        def _tokenize(self, text: str, images: list) -> tuple: ...

        def image_tokens(self, image01: torch.Tensor) -> int | None: ...

        def image_side_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]: ...

        def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]: ...

        def chat_template_options(self) -> dict[str, Any]: ...

        def effective_generation(self) -> dict[str, Any]: ...

        def _family_settings(self) -> dict[str, Any]: ...

        def _fallback_template(self) -> str | None: ...

        def _model_loader(self) -> Any: ...

        # one part's methods that another calls
        def check_ready(self) -> None: ...  # loading.py

        def _provenance_record(self, folder: Path, commit: str | None, used: str | None, notes: list[str]
                               ) -> dict[str, Any]: ...  # provenance.py

        def encode(self, prompt: Prompt, target_text: str | None = None, *, images: list | None = None
                   ) -> Encoded: ...  # encoding.py

        def _choose_template(self) -> str: ...  # encoding.py

        @property
        def input_device(self) -> torch.device: ...  # encoding.py

        def image_token_counts(self, encoded: Encoded) -> list[int]: ...  # encoding.py

        def image_record(self, encoded: Encoded) -> dict[str, Any]: ...  # encoding.py

        def prepared_images(self, refs: Sequence[ImageRef], memo: dict) -> list: ...  # image_reuse.py

        def batch_image_inputs(self, batch: Sequence[tuple[Request, Encoded]], features: dict | None = None,
                               prefilled: Sequence[int] | None = None
                               ) -> tuple[list[dict], Any | None]: ...  # image_reuse.py

        def batch_image_features(self, batch: Sequence[tuple[Request, Encoded]]) -> dict | None: ...  # image_reuse.py

        def image_key(self, ref: ImageRef) -> tuple[str, str]: ...  # image_reuse.py

        def _features_output(self, rows: torch.Tensor) -> Any: ...  # image_reuse.py

        def plan_shared_prefixes(self, batch: Sequence[tuple[Request, Encoded]], image_features: dict | None
                                 ) -> PrefixPlan | None: ...  # prefix_reuse.py

        def prefill_prefixes(self, batch: Sequence[tuple[Request, Encoded]], plan: PrefixPlan,
                             image_features: dict | None) -> Prefilled | None: ...  # prefix_reuse.py

        def prefix_failed(self, exc: Exception) -> None: ...  # prefix_reuse.py

        def forget_images(self) -> None: ...  # image_reuse.py

        def generate_batch(self, encoded: Sequence[Encoded], pixel_inputs: Sequence[dict[str, torch.Tensor]],
                           settings: dict[str, Any], seeds: Sequence[int] | None = None,
                           image_features: Any | None = None, prefilled: Prefilled | None = None
                           ) -> list[Generated]: ...  # batched.py

        def _pad_id(self) -> int: ...  # batched.py

        def image_token_id(self) -> int | None: ...  # encoding.py

        def _model_pixels(self, encoded: Encoded) -> dict[str, torch.Tensor]: ...  # batched.py
