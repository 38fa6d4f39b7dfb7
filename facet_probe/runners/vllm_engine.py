"""vLLM's offline engine (`vllm.LLM`) behind the runner contract: continuous batching over the whole manifest.

An optional extra (`pip install 'facet_probe[vllm]'`: vllm 0.30.0, the release that installs beside the
project's torch 2.13.0 and transformers 5.x). A vLLM config wraps an HF config (`hf:`, composed from the
HF model's own file), so both runners read one set of settings: the checkpoint, revision, dtype, generation,
thinking switch and chat template. The prompt is rendered here exactly as the HF runner renders it (the
same template choice: checkpoint, older `chat_template.json` layout, or the family's order-preserving
fallback), and handed to `LLM.generate` as vLLM's `TextPrompt` (`prompt` + `multi_modal_data={"image":
[PIL images in display order]}`), with greedy `SamplingParams` (max_tokens 512; 2048 while thinking).

Configs vLLM cannot serve as configured (the paper's NF4 quantisation, settings with no vLLM equivalent,
an architecture this vLLM lacks, vLLM absent) say why and, with `fallback: hf` (default), run on the HF
runner under the HF fingerprint; `fallback: refuse` stops instead. Untested on an engine in this project
(no GPU here): the CPU tests check the inputs against vLLM's documented schema.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import time
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from facet_probe.runners.base import Request, Response, RunnerError
from facet_probe.runners.hf.base import HFRunner, _plain, snapshot_commit, weights_digest
from facet_probe.runners.hf.decoding import request_seed, split_thinking
from facet_probe.runners.hf.templates import checkpoint_template, choose_template, keeps_order

log = logging.getLogger("facet_probe.runners.vllm")

#: the release that installs beside torch 2.13.0 and transformers 5.24 (checked with pip --dry-run)
VLLM_PIN = "vllm==0.30.0"
#: HF generation keys and the `vllm.SamplingParams` field each becomes
SAMPLING_FIELDS = {"max_new_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                   "top_k": "top_k", "repetition_penalty": "repetition_penalty"}


class VLLMFallback(StrEnum):
    """What a config vLLM cannot serve does: run on the HF runner (`hf`), or stop (`refuse`)."""

    HF = "hf"
    REFUSE = "refuse"


def vllm_version() -> str | None:
    """The installed vLLM's version, None when it is not installed."""
    if importlib.util.find_spec("vllm") is None:
        return None
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def not_installed_message(name: str) -> str:
    return (f"{name}: vLLM is not installed. Install the extra beside the project's pins: "
            f"pip install 'facet_probe[vllm]' ({VLLM_PIN}, which pins torch 2.13.0; a CUDA machine is needed to "
            "run it), or set model.fallback=hf to run this config on the HF runner.")


def unservable_reason(hf: HFRunner, architectures: Sequence[str], supported: Sequence[str] | None) -> str | None:
    """Why vLLM cannot serve `hf`'s config as configured (None: it can). `supported`: vLLM's architectures,
    None when vLLM is not installed (then only the config is judged)."""
    if hf.adapter is not None:
        return (f"model.hf.adapter={hf.adapter}: PEFT adapters are applied by the HF runner only (vLLM's LoRA "
                "serving is not wired here)")
    if hf.quantization_used == "nf4":
        return ("the config quantises to bitsandbytes NF4 with double quantisation and bf16 compute (the paper's "
                "setting); vLLM's in-flight bitsandbytes is not that. Set model.hf.quantization=off to serve the "
                "bf16 weights with vLLM")
    extra = sorted(k for k, v in hf.effective_generation().items() if k not in SAMPLING_FIELDS and v is not None)
    if extra:
        return f"generation settings {extra} have no vLLM SamplingParams field mapped here"
    family = {k: v for k, v in hf._family_settings().items() if k != "thinking" and v is not None}
    if family:
        return f"family settings {family} have no vLLM engine argument checked here"
    if supported is not None and not set(architectures) & set(supported):
        return f"this vLLM has no implementation of {list(architectures)}"
    return None


def strip_bos(text: str, tokenizer) -> str:
    """The rendered text without a leading BOS when the tokenizer adds one itself (vLLM tokenizes a text prompt
    with special tokens, so a template's BOS would be doubled; the HF runner does the same by
    `add_special_tokens_for`)."""
    bos = tokenizer.bos_token
    if not bos or not text.startswith(bos):
        return text
    adds = tokenizer("x", add_special_tokens=True)["input_ids"][:1] == [tokenizer.bos_token_id]
    return text[len(bos):] if adds else text


class VLLMRunner:
    """The offline vLLM engine for an HF model config (`hf`), or that HF runner where vLLM cannot serve it."""

    family = "vllm"

    def __init__(self, *, name: str, hf: HFRunner, fallback: VLLMFallback | str = VLLMFallback.HF,
                 engine_args: dict[str, Any] | None = None, max_images_per_prompt: int = 16,
                 window: int = 512) -> None:
        if not isinstance(hf, HFRunner):
            raise RunnerError(f"{name}: model.hf must be an HF model config (a _target_ under facet_probe.runners.hf)")
        self.name = name
        self.hf = hf
        self.fallback = VLLMFallback(fallback)
        self.engine_args = dict(_plain(engine_args) or {})
        self.max_images = int(max_images_per_prompt)
        self.window = int(window)
        self.engine: str | None = None  # "vllm" or "hf", decided by preflight
        self.reason: str | None = None  # why not vLLM
        self.llm = None
        self.tokenizer = None
        self.folder: Path | None = None
        self.weights: str | None = None
        self._template: str | None = None
        self._template_label = ""
        self.provenance: dict[str, Any] = {}

    # --- deciding the engine ----------------------------------------------------------------------------
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
        archs = json.loads((folder / "config.json").read_text()).get("architectures") or []
        reason = unservable_reason(self.hf, archs, supported)
        if reason is None and version is None:
            reason = "vLLM is not installed"
        if reason is None:
            self.engine = "vllm"
            return
        if self.fallback == VLLMFallback.REFUSE:
            raise RunnerError(not_installed_message(self.name) if version is None
                              else f"{self.name}: vLLM cannot serve this config: {reason}")
        log.warning("%s: vLLM cannot serve this config (%s); running it on the HF runner", self.name, reason)
        self.engine, self.reason = "hf", reason

    # --- Runner protocol -------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        """The HF runner's fingerprint when it answers; else vLLM's own (other kernels: other outputs)."""
        self._decide()
        if self.engine == "hf":
            return self.hf.fingerprint()
        fp = {"runner": f"vllm/{self.hf.family}", "model_id": self.hf.model_id, "revision": self.hf.revision,
              "dtype": self.hf.dtype, "quantization": "none", "sampling": self.sampling_settings(),
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
            self.hf._check_tokenizer(self.folder)

    def check_ready(self) -> None:
        self._decide()
        if self.engine == "hf":
            self.hf.check_ready()
            self.provenance = {**self.hf.provenance, "engine": "hf", "vllm_fallback": self.reason}
            return
        if self.llm is not None:
            return
        self.prepare_inputs()
        from vllm import LLM

        args = self.llm_args()
        self.llm = LLM(**args)
        self.provenance = {"engine": "vllm", "vllm": vllm_version(), "engine_args": _jsonable(args),
                           "model_id": self.hf.model_id, "revision": self.hf.revision,
                           "commit": snapshot_commit(self.folder.resolve()), "weights": self.weights,
                           "dtype": self.hf.dtype, "quantization": "none", "chat_template": self._template_label}

    def prepare_inputs(self) -> None:
        """Tokenizer, weights name and chat template (no engine, no weights): all the inputs need."""
        from transformers import AutoTokenizer

        self._decide()
        folder = self.folder
        self.tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=self.hf.trust_remote_code)
        self.weights = snapshot_commit(folder.resolve()) or weights_digest(folder)
        hf = self.hf
        self._template, self._template_label = choose_template(
            self.name, hf.family, hf.chat_template, checkpoint_template(self.tokenizer, None, folder),
            hf._fallback_template(),
            lambda t: keeps_order(self.tokenizer, t, hf.image_placeholder, hf.chat_template_options()), folder)

    def llm_args(self) -> dict[str, Any]:
        """`vllm.LLM` keyword arguments: the checkpoint, its dtype, the image limit, then `engine_args`."""
        hf = self.hf
        args: dict[str, Any] = {"model": str(self.folder), "tokenizer": str(self.folder),
                                "dtype": "auto" if hf.dtype == "auto" else hf.dtype,
                                "trust_remote_code": hf.trust_remote_code, "seed": 0,
                                "limit_mm_per_prompt": {"image": self.max_images}}
        if hf.image_processor_kwargs:
            args["mm_processor_kwargs"] = hf.image_processor_kwargs
        return {**args, **self.engine_args}

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

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        """Windows of `window` requests through `LLM.generate` (continuous batching inside each window);
        each window's responses are yielded as it completes, so the store persists them."""
        self.check_ready()
        if self.engine == "hf":
            for req, resp in self.hf.generate(requests):
                resp.provenance = {**resp.provenance, "engine": "hf", "vllm_fallback": self.reason}
                yield req, resp
            return
        from vllm import SamplingParams

        requests = list(requests)
        for start in range(0, len(requests), self.window):
            ready, prompts, params = [], [], []
            for req in requests[start:start + self.window]:
                n = len(req.prompt.images())
                if n > self.max_images:
                    yield req, self._error(req, f"images: {n} images > model.max_images_per_prompt "
                                                f"{self.max_images}; raise it")
                    continue
                ready.append(req)
                prompts.append(self.build_prompt(req))
                params.append(SamplingParams(**self.sampling_kwargs(req)))
            t0 = time.perf_counter()
            try:
                outputs = self.llm.generate(prompts, params, use_tqdm=False)
            except Exception as exc:  # one bad prompt fails the call: isolate it
                if len(ready) == 1:
                    yield ready[0], self._error(ready[0], f"generation: {type(exc).__name__}: {exc}")
                    continue
                outputs = None
            if outputs is None:
                for req, prompt, param in zip(ready, prompts, params, strict=True):
                    try:
                        [one] = self.llm.generate([prompt], [param], use_tqdm=False)
                        yield req, self._response(req, one, prompt, time.perf_counter() - t0)
                    except Exception as exc:
                        yield req, self._error(req, f"generation: {type(exc).__name__}: {exc}")
                continue
            latency = time.perf_counter() - t0
            for req, prompt, out in zip(ready, prompts, outputs, strict=True):
                yield req, self._response(req, out, prompt, latency)

    def _response(self, req: Request, out, prompt: dict[str, Any], latency: float) -> Response:
        completion = out.outputs[0]
        raw, text, thinking, truncated = completion.text, completion.text.strip(), None, False
        tags = self.hf.think_tags
        if tags is not None:
            opened = prompt["prompt"].rstrip().endswith(tags[0])
            text, thinking, truncated = split_thinking(raw, *tags, prompt_opened=opened)
        prov = {**self.provenance, "stop_reason": completion.finish_reason, "thinking_truncated": truncated,
                "sampling": self.sampling_kwargs(req), "image_sha256": [r.sha256 for r in req.prompt.images()]}
        usage = {"prompt_tokens": len(out.prompt_token_ids or []), "completion_tokens": len(completion.token_ids)}
        return Response(text=text, thinking=thinking, latency_s=latency, provenance=prov, usage=usage)

    def _error(self, req: Request, message: str) -> Response:
        return Response(text="", error=message, provenance={
            **self.provenance, "image_sha256": [r.sha256 for r in req.prompt.images()]})

    def close(self) -> None:
        self.llm = None
        self.hf.close()


def _jsonable(args: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(args, default=str))
