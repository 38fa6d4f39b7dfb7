"""vLLM's offline engine (`vllm.LLM`) behind the runner contract: continuous batching over the whole manifest.

It runs where vLLM and the project share a venv (vllm 0.30.0, the release that installs beside torch 2.13.0 and
transformers 5.x: a fresh venv with the `vllm` extra, never the dev one; the supported way is a server in vLLM's
own venv, `VLLM_VENV`, audited with `model=vllm_server`). A vLLM config wraps an HF config (`hf:`, composed from
the HF model's own file), so both runners read one set of settings: the checkpoint, revision, dtype, generation,
thinking switch and chat template. The prompt is rendered here exactly as the HF runner renders it (the
same template choice: checkpoint, older `chat_template.json` layout, or the family's order-preserving
fallback), and handed to `LLM.generate` as vLLM's `TextPrompt` (`prompt` + `multi_modal_data={"image":
[PIL images in display order]}`), with greedy `SamplingParams` (max_tokens 512; 2048 while thinking).

The engine is sized from the run's own prompts, counted before it starts by the HF adapter's own processor
(on an empty, meta-device copy of the model: no weights): `max_model_len` is the longest prompt (text and
image tokens) plus the reply budget, rounded up to `MAX_MODEL_LEN_MULTIPLE` and capped at the model's
context (vLLM would otherwise take the whole context, 262k for Qwen3.5, and size its KV cache for it), and
`limit_mm_per_prompt` is the run's most images per prompt and no video (`mm_limits`). A prompt past the
context is a `context_overflow` error for that trial, never sent (and a cell whose prompts mostly cannot fit
stops, as on the HF runner).
When one `LLM.generate` call fails (vLLM rejects a bad prompt for the whole call), its window is bisected
(`bisect_calls`): about 2*log2(window) calls isolate a bad prompt, and every request records its own
latency (vLLM's per-request timings, else the wall time of the call that answered it).

Configs vLLM cannot serve as configured (the paper's NF4 quantisation, settings with no vLLM equivalent,
an architecture this vLLM lacks, vLLM absent) say why and, with `fallback: hf` (default), run on the HF
runner under the HF fingerprint; `fallback: refuse` stops instead. vLLM 0.30.0's model registry serves the
architecture of every `vllm_*` config; `VLLM_030_REGISTRY` records it for each architecture the HF adapters load
(InstructBLIP and IDEFICS: none), and an installed vLLM's own registry wins (docs/hf_models.md). Untested on an engine in this project (no GPU
here): the CPU tests check the inputs against vLLM's documented schema and drive the runner through a
stand-in with `LLM.generate`'s shape.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.metadata
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from facet_probe.core.extras import installed, pip_install
from facet_probe.runners.base import Rekeying, Request, Response, RunnerError, plain
from facet_probe.runners.hf.base import HFRunner, snapshot_commit, weights_digest
from facet_probe.runners.hf.context import (
    ContextCheck,
    Fit,
    HFFailureKind,
    cell_overflow_message,
    context_limit,
    most_do_not_fit,
)
from facet_probe.runners.hf.decoding import request_seed, split_thinking
from facet_probe.runners.hf.templates import checkpoint_template, choose_template, keeps_order

log = logging.getLogger("facet_probe.runners.vllm")

T = TypeVar("T")
R = TypeVar("R")

#: the newest release that installs beside torch 2.13.0 and transformers 5.25 (its wheel's Requires-Dist: torch==2.13.0,
#: transformers>=5.10.4; 0.31 and 0.32 pin torch 2.13.0 but cap transformers below 5.18 / 5.20, 0.33 needs torch 2.14)
VLLM_PIN = "vllm==0.30.0"
#: vLLM 0.30.0's model registry (`vllm/model_executor/models/registry.py` in its wheel, `_MULTIMODAL_MODELS`) for
#: every architecture this project's HF adapters load: the vLLM module that implements it, None where 0.30.0 has
#: none (those run on the HF runner). Used where vLLM is not importable; an installed vLLM's own registry wins.
VLLM_030_REGISTRY: dict[str, str | None] = {
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3VLForConditionalGeneration": "qwen3_vl",
    "Qwen2_5_VLForConditionalGeneration": "qwen2_5_vl",
    "InternVLForConditionalGeneration": "interns1",
    "Gemma3ForConditionalGeneration": "gemma3_mm",
    "LlavaForConditionalGeneration": "llava",
    "KimiVLForConditionalGeneration": "kimi_vl",
    "Blip2ForConditionalGeneration": "blip2",
    "InstructBlipForConditionalGeneration": None,
    "IdeficsForVisionText2Text": None,
}
#: HF generation keys and the `vllm.SamplingParams` field each becomes
SAMPLING_FIELDS = {"max_new_tokens": "max_tokens", "min_new_tokens": "min_tokens", "temperature": "temperature",
                   "top_p": "top_p", "top_k": "top_k", "repetition_penalty": "repetition_penalty"}
#: `max_model_len` is rounded up to a multiple of this (room for a few tokens vLLM's processor counts differently)
MAX_MODEL_LEN_MULTIPLE = 1024
#: what vLLM 0.30 says when a prompt does not fit `max_model_len` (input_processor._validate_prompt_len)
_VLLM_TOO_LONG = "maximum model length"


class VLLMFallback(StrEnum):
    """What a config vLLM cannot serve does: run on the HF runner (`hf`), or stop (`refuse`)."""

    HF = "hf"
    REFUSE = "refuse"


def vllm_version() -> str | None:
    """The installed vLLM's version, None when it is not installed."""
    if not installed("vllm"):
        return None
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


#: the supported way to run vLLM: a venv of its own (vLLM 0.30.0 resolves there; beside the project's dev install it
#: would downgrade fastapi, numba and numpy: facet_probe_dev/vllm_resolution.py), serving the model to the project's
#: venv, which audits it with `model=vllm_server` (docs/hf_models.md, "vLLM")
VLLM_VENV = f"python -m venv .venv-vllm && .venv-vllm/bin/pip install {VLLM_PIN}"


def serve_command(model_id: str, revision: str | None = None, max_images: int = 16) -> str:
    """The `vllm serve` command (run from vLLM's own venv) for a checkpoint, pinned to `revision` when one is
    configured, with the engine limits the in-process engine would take (`mm_limits`)."""
    pinned = f" --revision {revision}" if revision else ""
    return (f"vllm serve {model_id}{pinned} --dtype bfloat16 --port 8000 "
            f"--limit-mm-per-prompt '{json.dumps(mm_limits(max_images))}'")


def not_installed_message(name: str, model_id: str, revision: str | None = None, max_images: int = 16) -> str:
    """What a `vllm_*` config that must run on vLLM says where vLLM is not installed: the supported way."""
    return (f"{name}: vLLM is not installed in this venv. Serve the model from a venv of its own ({VLLM_VENV}; then "
            f".venv-vllm/bin/{serve_command(model_id, revision, max_images)}; a CUDA machine) and audit it with "
            f"model=vllm_server model.model_id={model_id}. The in-process engine runs only in a venv where vLLM and "
            f"the project install together ({pip_install('vllm')} into a fresh venv; docs/hf_models.md, \"vLLM\"). "
            "Or set model.fallback=hf to run this config on the HF runner.")


def unservable_reason(hf: HFRunner, architectures: Sequence[str], supported: Sequence[str] | None) -> str | None:
    """Why vLLM cannot serve `hf`'s config as configured (None: it can). `supported`: vLLM's architectures,
    None when vLLM is not installed (then the config and `VLLM_030_REGISTRY` are judged)."""
    if hf.adapter is not None:
        return (f"model.hf.adapter={hf.adapter}: PEFT adapters are applied by the HF runner only (vLLM's LoRA "
                "serving is not wired here)")
    if hf.quantization_used != "none":  # nf4, or `require` without bitsandbytes: never served unquantised instead
        return (f"the config quantises ({hf.quantization_used}) to bitsandbytes NF4 with double quantisation and "
                "bf16 compute (the paper's setting); vLLM's in-flight bitsandbytes is not that. Set model.hf.quantization=off to serve the "
                "bf16 weights with vLLM")
    extra = sorted(k for k, v in hf.effective_generation().items() if k not in SAMPLING_FIELDS and v is not None)
    if extra:
        return f"generation settings {extra} have no vLLM SamplingParams field mapped here"
    family = {k: v for k, v in hf._family_settings().items() if k != "thinking" and v is not None}
    if family:
        return f"family settings {family} have no vLLM engine argument checked here"
    if supported is not None and not set(architectures) & set(supported):
        return f"this vLLM has no implementation of {list(architectures)}"
    if supported is None and architectures and vllm_030_module(architectures) is None \
            and all(a in VLLM_030_REGISTRY for a in architectures):
        return f"vLLM 0.30.0 has no implementation of {list(architectures)}"
    return None


def vllm_030_module(architectures: Sequence[str]) -> str | None:
    """The vLLM 0.30.0 module that serves one of `architectures` (`VLLM_030_REGISTRY`), None where it has none."""
    return next((VLLM_030_REGISTRY[a] for a in architectures if VLLM_030_REGISTRY.get(a)), None)


def strip_bos(text: str, tokenizer) -> str:
    """The rendered text without a leading BOS when the tokenizer adds one itself (vLLM tokenizes a text prompt
    with special tokens, so a template's BOS would be doubled; the HF runner does the same by
    `add_special_tokens_for`)."""
    bos = tokenizer.bos_token
    if not bos or not text.startswith(bos):
        return text
    adds = tokenizer("x", add_special_tokens=True)["input_ids"][:1] == [tokenizer.bos_token_id]
    return text[len(bos):] if adds else text


def sized_max_model_len(longest_prompt: int, reply_tokens: int, context: int | None,
                        multiple: int = MAX_MODEL_LEN_MULTIPLE) -> int:
    """`max_model_len` for a run: its longest prompt plus the reply budget, rounded up to `multiple`, capped at
    the model's `context` (None: no cap known)."""
    needed = int(longest_prompt) + int(reply_tokens)
    rounded = math.ceil(needed / multiple) * multiple
    return rounded if context is None else min(rounded, int(context))


def mm_limits(images: int) -> dict[str, int]:
    """`limit_mm_per_prompt` for a run whose prompts carry at most `images` images: that many images and no video.
    No prompt of this project carries a video (core/prompts has no video part), and a modality left out would keep
    vLLM's default (999), for which Qwen3.5 and InternVL reserve encoder budget and profiling memory; at 0 vLLM leaves
    the video encoder path out (and ignores the key for a model without video)."""
    return {"image": int(images), "video": 0}


def quantization_of(config: dict[str, Any], engine_args: dict[str, Any]) -> str:
    """The quantisation vLLM serves with: `engine_args.quantization` when set, else the checkpoint's own
    (`config.json` `quantization_config.quant_method`, e.g. a pre-quantised AWQ or FP8 folder), else none."""
    if engine_args.get("quantization"):
        return str(engine_args["quantization"])
    method = (config.get("quantization_config") or {}).get("quant_method")
    return str(method) if method else "none"


def bisect_calls(items: Sequence[T], call: Callable[[list[T]], Sequence[R]],
                 clock: Callable[[], float] = time.perf_counter) -> Iterator[tuple[T, R | Exception, float]]:
    """`call` on all `items` at once; when it raises, on each half in turn, and so on down to single items, so
    one bad item among n costs about 2*log2(n) calls (not n). Yields, in item order, (item, its result or the
    exception its lone call raised, the seconds of the call that produced it)."""
    stack = [list(items)] if items else []
    while stack:
        batch = stack.pop()
        t0 = clock()
        try:
            results = call(batch)
        except Exception as exc:  # the engine rejects a whole call for one bad input
            if len(batch) == 1:
                yield batch[0], exc, clock() - t0
            else:
                half = (len(batch) + 1) // 2
                stack.extend([batch[half:], batch[:half]])
            continue
        seconds = clock() - t0
        for item, result in zip(batch, results, strict=True):
            yield item, result, seconds


def request_latency(output: Any, call_seconds: float) -> tuple[float, str]:
    """One request's own latency: vLLM's per-request timings (queued to last token, engine clock) when it kept
    them (`disable_log_stats=False`), else the wall time of the call that answered it; and which it is."""
    metrics = getattr(output, "metrics", None)
    start, end = getattr(metrics, "queued_ts", 0.0) or 0.0, getattr(metrics, "last_token_ts", 0.0) or 0.0
    if start > 0 and end >= start:
        return end - start, "request"
    return call_seconds, "call"


@dataclass(frozen=True)
class EngineSize:
    """What an engine was started for: `max_model_len` (None: vLLM's default, the model's context) and
    `limit_mm_per_prompt`'s images."""

    max_model_len: int | None
    images: int

    def covers(self, other: EngineSize) -> bool:
        longer = self.max_model_len is None or (other.max_model_len is not None
                                                and other.max_model_len <= self.max_model_len)
        return longer and other.images <= self.images


@dataclass
class Counted:
    """One request checked before the engine: its prompt's fit (None when prompts cannot be counted here), or
    the error it gets instead of a call."""

    request: Request
    fit: Fit | None = None
    images: int = 0
    error: str | None = None


class VLLMRunner(Rekeying):
    """The offline vLLM engine for an HF model config (`hf`), or that HF runner where vLLM cannot serve it (then
    its older fingerprints too: `Rekeying`)."""

    family = "vllm"

    def __init__(self, *, name: str, hf: HFRunner, fallback: VLLMFallback | str = VLLMFallback.HF,
                 engine_args: dict[str, Any] | None = None, max_images_per_prompt: int = 16,
                 window: int = 512) -> None:
        if not isinstance(hf, HFRunner):
            raise RunnerError(f"{name}: model.hf must be an HF model config (a _target_ under facet_probe.runners.hf)")
        self.name = name
        self.hf = hf
        self.fallback = VLLMFallback(fallback)
        self.engine_args = dict(plain(engine_args) or {})
        self.max_images = int(max_images_per_prompt)
        self.window = int(window)
        self.engine: str | None = None  # "vllm" or "hf", decided by preflight
        self.reason: str | None = None  # why not vLLM
        self.llm: Any = None  # vllm.LLM, once started
        self.size: EngineSize | None = None  # what `llm` was started for
        self.tokenizer: Any = None
        self.folder: Path | None = None
        self.weights: str | None = None
        self._template: str | None = None
        self._template_label = ""
        self._counter: HFRunner | None = None  # `hf` over an empty model: counts prompt tokens (`prompt_fit`)
        self._counter_error: str | None = None  # why prompts cannot be counted before the engine
        self.provenance: dict[str, Any] = {}

    # --- deciding the engine ----------------------------------------------------------------------------
    @property
    def checkpoint(self) -> Path:
        """The checkpoint folder, found by `_decide` (which every entry point calls first)."""
        assert self.folder is not None, "the engine is decided first"
        return self.folder

    def _decide(self) -> None:
        if self.engine is not None:
            return
        folder, _ = HFRunner._resolve_folder(self.hf)  # the base lookup: vLLM runs Kimi-VL natively, no remote code
        self.folder = folder
        version = vllm_version()
        supported = None
        if version is not None:
            from vllm import ModelRegistry

            supported = list(ModelRegistry.get_supported_archs())
        archs = self._config().get("architectures") or []
        reason = unservable_reason(self.hf, archs, supported)
        if reason is None and version is None:
            reason = "vLLM is not installed"
        if reason is None:
            self.engine = "vllm"
            return
        if self.fallback == VLLMFallback.REFUSE:
            raise RunnerError(not_installed_message(self.name, self.hf.model_id, self.hf.revision, self.max_images)
                              if version is None
                              else f"{self.name}: vLLM cannot serve this config: {reason}")
        log.warning("%s: vLLM cannot serve this config (%s); running it on the HF runner", self.name, reason)
        self.engine, self.reason = "hf", reason

    def _config(self) -> dict[str, Any]:
        return json.loads((self.checkpoint / "config.json").read_text())

    def quantization(self) -> str:
        """The quantisation served (`quantization_of` the checkpoint's config and `engine_args`)."""
        return quantization_of(self._config(), self.engine_args)

    # --- Runner protocol -------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        """The HF runner's fingerprint when it answers; else vLLM's own (other kernels: other outputs)."""
        self._decide()
        if self.engine == "hf":
            return self.hf.fingerprint()
        fp = {"runner": f"vllm/{self.hf.family}", "model_id": self.hf.model_id, "revision": self.hf.revision,
              "dtype": self.hf.dtype, "quantization": self.quantization(), "sampling": self.sampling_settings(),
              "chat_template_options": self.hf.chat_template_options(),
              "image_processor_kwargs": self.hf.image_processor_kwargs, "engine_args": self.engine_args,
              "vllm": vllm_version()}
        if self.weights is not None:
            fp["weights"] = self.weights
        if self.hf.chat_template is not None:
            fp["chat_template_sha256"] = hashlib.sha256(self.hf.chat_template.encode()).hexdigest()[:16]
        return fp

    def legacy_fingerprints(self) -> list[dict[str, Any]]:
        return self.hf.legacy_fingerprints() if self.engine == "hf" else []

    def preflight(self) -> None:
        self._decide()
        if self.engine == "hf":
            self.hf.preflight()
        else:
            self.hf._check_tokenizer(self.checkpoint)

    def check_ready(self) -> None:
        """The HF runner where it answers; else the inputs (tokenizer, template, weights name). The engine itself
        starts at the first `generate`, sized for the prompts it gets."""
        self._decide()
        if self.engine == "hf":
            self.hf.check_ready()
            self.provenance = {**self.hf.provenance, "engine": "hf", "vllm_fallback": self.reason}
            return
        if self.tokenizer is None:
            self.prepare_inputs()

    def prepare_inputs(self) -> None:
        """Tokenizer, weights name and chat template (no engine, no weights): all the inputs need."""
        from transformers import AutoTokenizer

        self._decide()
        folder = self.checkpoint
        self.tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=self.hf.trust_remote_code)
        self.weights = snapshot_commit(folder.resolve()) or weights_digest(folder)
        hf = self.hf
        self._template, self._template_label = choose_template(
            self.name, hf.family, hf.chat_template, checkpoint_template(self.tokenizer, None, folder),
            hf._fallback_template(),
            lambda t: keeps_order(self.tokenizer, t, hf.image_placeholder, hf.chat_template_options()), folder)
        self.provenance = {"engine": "vllm", "vllm": vllm_version(), "model_id": hf.model_id, "revision": hf.revision,
                           "commit": snapshot_commit(folder.resolve()), "weights": self.weights, "dtype": hf.dtype,
                           "quantization": self.quantization(), "chat_template": self._template_label}

    def llm_args(self, size: EngineSize | None = None) -> dict[str, Any]:
        """`vllm.LLM` keyword arguments: the checkpoint, its dtype, the run's sizes (`size`: `max_model_len`, and
        `mm_limits`), per-request timings on, then `engine_args` (which win; a `limit_mm_per_prompt` there wins per
        modality, so video stays 0 unless it names video)."""
        hf = self.hf
        limits = {**mm_limits(self.max_images if size is None else size.images),
                  **(self.engine_args.get("limit_mm_per_prompt") or {})}
        args: dict[str, Any] = {"model": str(self.folder), "tokenizer": str(self.folder),
                                "dtype": "auto" if hf.dtype == "auto" else hf.dtype,
                                "trust_remote_code": hf.trust_remote_code, "seed": 0,
                                "disable_log_stats": False}  # keeps each request's timings (`request_latency`)
        if size is not None and size.max_model_len is not None:
            args["max_model_len"] = size.max_model_len
        if hf.image_processor_kwargs:
            args["mm_processor_kwargs"] = hf.image_processor_kwargs
        return {**args, **self.engine_args, "limit_mm_per_prompt": limits}

    def sampling_settings(self) -> dict[str, Any]:
        """The HF generation settings as `vllm.SamplingParams` fields (greedy at temperature 0)."""
        gen = self.hf.effective_generation()
        out = {SAMPLING_FIELDS[k]: v for k, v in gen.items() if k in SAMPLING_FIELDS}
        out["max_tokens"] = int(out["max_tokens"])
        out["top_k"] = -1 if out.get("top_k") in (None, 0) else int(out["top_k"])
        out["temperature"] = float(out.get("temperature") or 0.0)
        return {"n": 1, **out}

    def sampling_kwargs(self, request: Request) -> dict[str, Any]:
        """One request's `SamplingParams` keywords: its seed only when sampling."""
        kw = self.sampling_settings()
        if kw["temperature"] > 0:
            kw["seed"] = request_seed(request)
        return kw

    def build_prompt(self, request: Request) -> dict[str, Any]:
        """vLLM's `TextPrompt` for one request: the rendered chat text (one image placeholder per image, at its
        slot) and `multi_modal_data={"image": [...]}` with the PIL images in display order."""
        text = self.tokenizer.apply_chat_template(self.hf.chat_messages(request.prompt), chat_template=self._template,
                                                  add_generation_prompt=True, tokenize=False,
                                                  **self.hf.chat_template_options())
        out: dict[str, Any] = {"prompt": strip_bos(text, self.tokenizer)}
        images = [ref.to_pil() for ref in request.prompt.images()]
        if images:
            out["multi_modal_data"] = {"image": images}
        return out

    # --- sizing and the context guard ------------------------------------------------------------------
    def context(self) -> int | None:
        """The positions a prompt and its reply must fit: the model's context, or `engine_args.max_model_len`
        when that is set and smaller."""
        model = context_limit(self._counter.model.config) if self._counter is not None else None
        fixed = self.engine_args.get("max_model_len")
        if fixed is None:
            return model
        return int(fixed) if model is None else min(int(fixed), model)

    def _prompt_counter(self) -> HFRunner | None:
        """The HF adapter's processor over an empty (meta-device) copy of the model, to count each prompt's tokens
        as the HF runner encodes them (image tokens included) with no weights loaded; None, said once, where the
        processor cannot be built here (e.g. remote code that does not run on this transformers)."""
        if self._counter is not None or self._counter_error is not None:
            return self._counter
        from facet_probe.runners.hf.placement import empty_model

        hf = self.hf
        try:
            hf.folder = self.folder
            hf.model = empty_model(hf, None).model
            hf._load_processor(self.checkpoint)
            self._counter = hf
        except Exception as exc:
            hf.model = None
            self._counter_error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc) else ''}"
            log.warning("%s: cannot count prompt tokens before the engine starts (%s): vLLM sizes max_model_len "
                        "itself unless model.engine_args.max_model_len is set, and only vLLM refuses an over-long "
                        "prompt", self.name, self._counter_error)
        return self._counter

    def prompt_fit(self, prompt: dict[str, Any]) -> Fit | None:
        """The rendered prompt's tokens (text and image, as `build_prompt` sends it) plus the reply budget
        against `context()`; None where prompts cannot be counted here."""
        counter = self._prompt_counter()
        if counter is None:
            return None
        images = list((prompt.get("multi_modal_data") or {}).get("image") or [])
        ids = counter.tokenize(prompt["prompt"], images)[0]
        token = counter.image_token_id()
        image_tokens = int((ids == token).sum()) if token is not None else 0
        return Fit(int(ids.shape[0]), image_tokens, self.sampling_settings()["max_tokens"], self.context())

    def count(self, requests: Sequence[Request]) -> list[Counted]:
        """Each request checked before any call: too many images, a prompt that cannot be built, a prompt past
        the context (`context_overflow`) are errors; the rest carry their fit. With `context_check: label` a cell
        whose prompts mostly cannot fit stops the run (`RunnerError`), as on the HF runner."""
        out = []
        for req in requests:
            n = len(req.prompt.images())
            if n > self.max_images:
                out.append(Counted(req, images=n, error=f"images: {n} images > model.max_images_per_prompt "
                                                         f"{self.max_images}; raise it"))
                continue
            try:
                fit = self.prompt_fit(self.build_prompt(req))
            except Exception as exc:
                out.append(Counted(req, images=n, error=f"{HFFailureKind.ENCODE}: cannot encode the prompt: "
                                                        f"{type(exc).__name__}: {exc}"))
                continue
            out.append(Counted(req, fit, n, None if fit is None or fit.fits else fit.reason()))
        if self.hf.context_check == ContextCheck.LABEL:
            cells: dict[str, list[Fit]] = {}
            for c in out:
                if c.fit is not None:
                    cells.setdefault(str(c.request.metadata.get("cell", "(all)")), []).append(c.fit)
            for cell, fits in cells.items():
                if most_do_not_fit(fits):
                    hints = self._counter._context_hints() if self._counter is not None else []
                    raise RunnerError(cell_overflow_message(self.name, cell, fits, hints))
        return out

    def size_for(self, ready: Sequence[Counted]) -> EngineSize:
        """The engine for these prompts: `sized_max_model_len` of the longest (None where they cannot be counted)
        and the most images any of them has."""
        fits = [c.fit for c in ready if c.fit is not None]
        length = (sized_max_model_len(max(f.prompt_tokens for f in fits), fits[0].max_new_tokens, fits[0].limit)
                  if fits and len(fits) == len(ready) else None)
        return EngineSize(length, max(c.images for c in ready))

    # --- generation ------------------------------------------------------------------------------------
    def _ensure_engine(self, size: EngineSize) -> None:
        """Start `vllm.LLM` for `size`, or restart it where a later call needs more than it was started for."""
        if self.llm is not None and self.size is not None and self.size.covers(size):
            return
        if self.llm is not None and self.size is not None:  # started for less: restarted for both
            size = EngineSize(None if size.max_model_len is None or self.size.max_model_len is None
                              else max(size.max_model_len, self.size.max_model_len), max(size.images, self.size.images))
            log.info("%s: these prompts need more than the engine was started for (%s); restarting it for %s",
                     self.name, self.size, size)
            self.llm = None
            gc.collect()
        from vllm import LLM

        args = self.llm_args(size)
        self.llm, self.size = LLM(**args), size
        model_config = getattr(self.llm, "model_config", None)
        served = getattr(model_config, "quantization", None)
        self.provenance = {**self.provenance, "engine_args": _jsonable(args),
                           "max_model_len": getattr(model_config, "max_model_len", args.get("max_model_len")),
                           "quantization": str(served) if served else self.quantization()}
        log.info("%s: vLLM engine started (max_model_len %s, images per prompt %d)", self.name,
                 self.provenance["max_model_len"], size.images)

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        """Each request checked and counted (`count`), the engine started for them, then windows of `window`
        requests through `LLM.generate` (continuous batching inside each window; a failing call bisected,
        `bisect_calls`); each window's responses are yielded as it completes, so the store persists them."""
        self.check_ready()
        if self.engine == "hf":
            for req, resp in self.hf.generate(requests):
                resp.provenance = {**resp.provenance, "engine": "hf", "vllm_fallback": self.reason}
                yield req, resp
            return
        ready = []
        for counted in self.count(list(requests)):
            if counted.error is None:
                ready.append(counted)
            else:
                yield counted.request, self._error(counted.request, counted.error, counted.fit)
        if not ready:
            return
        self._ensure_engine(self.size_for(ready))
        from vllm import SamplingParams

        for start in range(0, len(ready), self.window):
            items = []
            for counted in ready[start:start + self.window]:
                req = counted.request
                items.append((counted, self.build_prompt(req), SamplingParams(**self.sampling_kwargs(req))))
            calls = bisect_calls(items, lambda batch: self.llm.generate([p for _, p, _ in batch],
                                                                          [s for _, _, s in batch], use_tqdm=False))
            for (counted, prompt, _), out, seconds in calls:
                req = counted.request
                if isinstance(out, Exception):
                    yield req, self._error(req, _failure(out), counted.fit)
                else:
                    yield req, self._response(req, out, prompt, seconds)

    def _response(self, req: Request, out, prompt: dict[str, Any], call_seconds: float) -> Response:
        completion = out.outputs[0]
        raw, text, thinking, truncated = completion.text, completion.text.strip(), None, False
        tags = self.hf.think_tags
        if tags is not None:
            opened = prompt["prompt"].rstrip().endswith(tags[0])
            text, thinking, truncated = split_thinking(raw, *tags, prompt_opened=opened)
        latency, timed = request_latency(out, call_seconds)
        prov = {**self.provenance, "stop_reason": completion.finish_reason, "thinking_truncated": truncated,
                "sampling": self.sampling_kwargs(req), "image_sha256": [r.sha256 for r in req.prompt.images()],
                "latency": timed}
        usage = {"prompt_tokens": len(out.prompt_token_ids or []), "completion_tokens": len(completion.token_ids)}
        return Response(text=text, thinking=thinking, latency_s=latency, provenance=prov, usage=usage)

    def _error(self, req: Request, message: str, fit: Fit | None = None) -> Response:
        extra = {} if fit is None else {"prompt_tokens": fit.prompt_tokens, "image_tokens": fit.image_tokens}
        return Response(text="", error=message, provenance={
            **self.provenance, "image_sha256": [r.sha256 for r in req.prompt.images()], **extra})

    def close(self) -> None:
        self.llm = None
        self.size = None
        self._counter = None
        self.hf.close()


def _failure(exc: Exception) -> str:
    """The error of a request vLLM refused or failed alone: `context_overflow` when vLLM says the prompt does not
    fit (a count that differed from ours), else `generation`."""
    kind = HFFailureKind.CONTEXT_OVERFLOW if _VLLM_TOO_LONG in str(exc) else HFFailureKind.GENERATION
    return f"{kind}: {type(exc).__name__}: {exc}"


def _jsonable(args: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(args, default=str))
