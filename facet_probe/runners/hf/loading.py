"""Loading a HuggingFace VLM: the checkpoint folder (local path or hub snapshot; its files: checkpoint.py),
the tokenizer check, the device map, dtype, quantisation and attention (decisions in fast_paths.py), and
a PEFT adapter on top (`adapter`, adapters.py).

`LoadingMixin` is one role of `HFRunner` (base.py); it reads the runner's settings (`name`, `model_id`,
`revision`, `local_path`, `adapter`, `dtype`, `device`, `quantization_used`, `attn_implementation`) and its family
hooks (`_model_loader`, `_load_processor`, `trust_remote_code`).
"""

from __future__ import annotations

import gc
import importlib.util
import io
import logging
from pathlib import Path
from typing import Any

import torch

from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.adapters import AdapterSource, apply_adapter, peft_missing, resolve_adapter
from facet_probe.runners.hf.checkpoint import (
    SNAPSHOT_FILES,
    TOKENIZER_FILES,
    download_command,
    hub_snapshot,
    snapshot_commit,
    tokenizer_files,
    weights_digest,
)
from facet_probe.runners.hf.fast_paths import flash_attention_status, nf4_config, resolve_attention
from facet_probe.runners.hf.linear_attention import log_linear_attention
from facet_probe.runners.hf.oom import is_oom
from facet_probe.runners.hf.parts import HFParts

log = logging.getLogger("facet_probe.runners.hf")

DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
          "float32": torch.float32, "fp32": torch.float32}


class LoadingMixin(HFParts):
    """Finds, checks and loads the checkpoint (see the module docstring)."""

    def preflight(self) -> None:
        """The checkpoint folder is there (local path or local hub cache) with a tokenizer, and the device exists;
        loads no weights."""
        if self._setup_error is not None:
            raise self._setup_error
        folder, _ = self._resolve_folder()
        self._check_tokenizer(folder)
        self._resolve_adapter()
        self._device_map()

    def _check_tokenizer(self, folder: Path) -> None:
        """Load the folder's tokenizer (seconds) before any weights (minutes), so that a folder without one
        fails with the true cause rather than transformers' hint about sentencepiece."""
        from transformers import AutoTokenizer

        if not tokenizer_files(folder):
            raise RunnerError(f"{self.name}: {folder} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): the "
                              "checkpoint was saved or downloaded without its tokenizer. Copy them in (or download "
                              f"the full snapshot: {download_command(self.model_id, self.revision)}).")
        try:
            AutoTokenizer.from_pretrained(folder, trust_remote_code=self.trust_remote_code)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise RunnerError(f"{self.name}: the tokenizer in {folder} cannot be loaded ({type(exc).__name__}: "
                              f"{first}); files there: {', '.join(tokenizer_files(folder))}") from exc

    def check_ready(self) -> None:
        """Load model and processor once; any failure becomes one `RunnerError` that says what to do."""
        if self.model is not None:
            return
        if self._setup_error is not None:
            raise self._setup_error
        try:
            self._load()
        except RunnerError:
            raise
        except Exception as exc:  # missing files, bad config, remote code not cached...
            raise RunnerError(f"{self.name}: cannot load {self._where()}: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self.model = None
        self.forget_images()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _where(self) -> str:
        return f"local_path={self.local_path}" if self.local_path else f"{self.model_id}@{self.revision or 'main'}"

    def _resolve_folder(self) -> tuple[Path, str | None]:
        """The checkpoint folder and its commit (hub snapshots only); never downloads when HF_HUB_OFFLINE=1."""
        if self.local_path:
            folder = Path(self.local_path).expanduser()
            if not (folder / "config.json").is_file():
                hint = (" The embedded tiny VLM is not in this checkout: train it with `make tiny-vlm`."
                        if folder.parent.name == "assets" and folder.parent.parent.name == "facet_probe" else "")
                raise RunnerError(f"{self.name}: local_path {folder} has no config.json (expected a save_pretrained "
                                  f"folder or a hub snapshot).{hint}")
            return folder, None  # named by its digest (`weights_id`); a snapshot's commit is still recorded
        path = hub_snapshot(self.name, self.model_id, self.revision, SNAPSHOT_FILES)
        return path, snapshot_commit(path)

    def weights_id(self) -> str:
        """What names the weights: a hub snapshot's commit, else the digest of the folder's model files
        (`weights_digest`), so that other weights under the same name and path (a retrained tiny VLM)
        never reuse stored trials or attack results."""
        folder, commit = self._resolve_folder()
        base = commit or weights_digest(folder)
        adapter = self._resolve_adapter()
        return base if adapter is None else f"{base}+adapter:{adapter.digest}"

    def _resolve_adapter(self) -> AdapterSource | None:
        """The PEFT adapter's folder and digest (None without `adapter`); peft must be installed."""
        if self.adapter is None:
            return None
        missing = peft_missing(self.name)
        if missing is not None:
            raise missing
        return resolve_adapter(self.name, self.adapter, self.adapter_revision)

    def _device_map(self) -> tuple[Any, str]:
        """(device_map for from_pretrained, the device name); plain CPU loading needs no accelerate."""
        dev = self.device
        if dev == "auto":
            dev = "cuda" if torch.cuda.is_available() else "cpu"
        if dev.startswith("cuda") and not torch.cuda.is_available():
            raise RunnerError(f"{self.name}: device={self.device} but no CUDA device is visible; use device=cpu")
        if dev == "cpu" and self.quantization_used != "nf4":
            return None, dev
        if importlib.util.find_spec("accelerate") is None:
            raise RunnerError(f"{self.name}: loading on {dev} (or in 4-bit) needs accelerate: pip install accelerate")
        if dev == "cuda":
            from facet_probe.runners.hf import placement  # one GPU where it fits, sharded where not

            # the decision: self.placement (for the provenance)
            return placement.device_map_for(self, self.placement_config), dev
        return {"": dev}, dev

    def _load(self) -> None:
        """Folder, tokenizer check, weights id, model, processor, template, first forward, provenance, in that
        order."""
        folder, commit = self._resolve_folder()
        self.folder = folder
        self._check_tokenizer(folder)  # before the weights: a missing tokenizer costs seconds, not minutes
        self.weights = commit or weights_digest(folder)
        adapter = self._resolve_adapter()  # before the weights too: a wrong adapter path fails in seconds
        model, used, notes, later = self._load_model(folder)
        if adapter is not None:
            model = apply_adapter(model, adapter)
            self.adapter_source = adapter
        model.eval().requires_grad_(False)  # gradients only ever flow to pixels
        self.model = model
        log_linear_attention(self.name, model, log)  # Qwen3.5's Gated-DeltaNet layers: fast kernels or PyTorch
        self._load_processor(folder)
        self._template = self._choose_template()
        used = self._settle_attention(used, later, notes)  # before the fingerprint: trials name what runs
        self.provenance = self._provenance_record(folder, commit, used, notes)

    def _load_model(self, folder: Path) -> tuple[Any, str, list[str], list[str]]:
        """The model with its dtype, quantisation, device map and the first attention implementation it
        supports; (model, that implementation, notes on what was chosen and why, the implementations still
        to fall back to)."""
        flash_ok, flash_reason = flash_attention_status()
        candidates, attn_note = resolve_attention(self.attn_implementation, flash_ok=flash_ok,
                                                  flash_reason=flash_reason)
        device_map, device = self._device_map()
        kwargs: dict[str, Any] = {"device_map": device_map, "trust_remote_code": self.trust_remote_code}
        kwargs["dtype"] = "auto" if self.dtype == "auto" else DTYPES[self.dtype]
        if self.quantization_used == "nf4":
            kwargs["quantization_config"] = nf4_config()
        notes = [n for n in (self._quant_note, attn_note) if n]
        for i, impl in enumerate(candidates):
            try:
                model = self._model_loader().from_pretrained(folder, attn_implementation=impl, **kwargs)
                break
            except (ValueError, ImportError) as exc:
                msg = str(exc)
                if i == len(candidates) - 1 or not (impl in msg or "attention" in msg.lower() or "attn" in msg):
                    raise
                notes.append(f"{impl} not supported by this model ({msg.splitlines()[0][:160]}); "
                             f"trying {candidates[i + 1]}")
        used = impl  # the implementation that loaded: the last one's failure raised
        if self.quantization_used == "nf4" and device == "cpu":
            # bitsandbytes 0.50 repacks 4-bit weights in place on the first no-grad CPU forward (AVX512-BF16
            # kernels); after that, backward through them fails. Keep the generic path so that generation and
            # pixel gradients can alternate (what the attack does).
            for module in model.modules():
                if getattr(module, "support_avx512bf16_for_cpu", False):
                    module.support_avx512bf16_for_cpu = False
        for note in notes:  # on a CPU machine the absence of FlashAttention-2 is expected: say it quietly
            log.log(logging.INFO if note == attn_note and not torch.cuda.is_available() else logging.WARNING,
                    "%s: %s", self.name, note)
        return model, used, notes, candidates[candidates.index(used) + 1:]

    def _settle_attention(self, used: str, later: list[str], notes: list[str]) -> str:
        """Run one short generation (`first_forward`) with the attention that loaded. A kernel can load and still
        fail on its first forward (flash-attn on a GPU or dtype it does not support): then switch, once, to the
        next implementation that runs it (FlashAttention-2 -> sdpa -> eager), say so in the log and the notes,
        and return it. Without a fallback (an explicit implementation), FlashAttention-2 failing is one
        `RunnerError`; a failure that every implementation shares is not the attention's and changes nothing."""
        if not later and used != "flash_attention_2":
            return used
        try:
            self.first_forward()
            return used
        except Exception as exc:  # whatever the kernel raises (RuntimeError, CUDA errors...)
            if is_oom(exc):
                return used  # not the kernel: the batching deals with memory
            failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
        if not later:
            raise RunnerError(f"{self.name}: attn_implementation={self.attn_implementation} loaded {used}, whose first "
                              f"forward fails ({failure}). Use model.attn_implementation=auto to fall back to sdpa.")
        for impl in later:
            if not self._switch_attention(impl):
                raise RunnerError(f"{self.name}: {used} fails on the first forward ({failure}) and this model cannot "
                                  f"switch its attention once loaded; set model.attn_implementation={impl}")
            try:
                self.first_forward()
            except Exception:
                continue
            note = f"{used} failed on the first forward ({failure}); using {impl} for this run"
            log.warning("%s: %s", self.name, note)
            notes.append(note)
            return impl
        self._switch_attention(used)  # every implementation fails alike: not the attention's fault
        return used

    def first_forward(self) -> None:
        """One greedy two-token generation of a short prompt with one image: the model's first forward."""
        from PIL import Image

        from facet_probe.core.items import ImageRef
        from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart

        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), (128, 96, 64)).save(buffer, format="PNG")
        prompt = Prompt(system="Answer briefly.", messages=(Message("user", (
            TextPart("Look at this."), ImagePart(ImageRef.from_bytes(buffer.getvalue())), TextPart("What is it?"))),))
        encoded = self.encode(prompt)
        self.generate_batch([encoded], [self._model_pixels(encoded)], {"max_new_tokens": 2})

    def _switch_attention(self, impl: str) -> bool:
        """Set the loaded model's attention implementation (transformers' `set_attn_implementation`); False when
        the model does not take it once loaded."""
        try:
            self.model.set_attn_implementation(impl)
        except (ValueError, ImportError, AttributeError):
            return False
        return getattr(self.model.config, "_attn_implementation", None) == impl
