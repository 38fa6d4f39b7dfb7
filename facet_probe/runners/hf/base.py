"""Thin shared base of the HuggingFace VLM adapters: loading, fast paths, batching, provenance.

A family adapter (qwen.py, internvl.py, gemma3.py, llava.py, kimi_vl.py) only says how its processor is
loaded, how a prompt becomes token ids and [0,1] images, and how images become `pixel_values`. This base
does the rest, the same way for every family:

* loading: `local_path` or hub `model_id` + `revision` (resolved once to a local snapshot, so the commit
  is known), `dtype`, quantisation `auto|off|require` (bitsandbytes NF4, double quantisation, bf16 compute),
  attention `auto|off|require` (flash_attention_2 -> sdpa -> eager, chosen at runtime, one clear message
  when an extra is missing) or an explicit implementation name (the decisions live in fast_paths.py);
* generation: prompts grouped by length, left padding, `batch_size` per call, the batch halved and retried
  on out-of-memory (a trial that fails even alone is returned as an error, never dropped), greedy unless
  `temperature > 0` (then each trial samples from its own generator seeded by `Request.seed`, whatever
  its batch), only new tokens decoded, a thinking trace split off (decoding.py), provenance recorded on
  every response.

Attack-facing interface (the same four methods on every family adapter; the attack suite uses only these):

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

`forward_logits_batch` and `generate_texts` do the same for several samples in one call.
"""

from __future__ import annotations

import copy
import difflib
import functools
import gc
import hashlib
import importlib.util
import logging
import platform
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from facet_probe.prompts import ImagePart, Prompt, TextPart
from facet_probe.runners.base import Request, Response, RunnerError
from facet_probe.runners.hf.context import (
    ContextCheck,
    Fit,
    HFFailureKind,
    cell_overflow_message,
    context_limit,
    most_do_not_fit,
)
from facet_probe.runners.hf.decoding import SeededSampler, request_seed, split_thinking
from facet_probe.runners.hf.fast_paths import (
    flash_attention_status,
    library_versions,
    nf4_config,
    quantization_status,
    resolve_attention,
    resolve_quantization,
)
from facet_probe.runners.hf.oom import BatchLimit, is_oom, run_halving
from facet_probe.runners.hf.placement import placement_config
from facet_probe.runners.hf.templates import checkpoint_template, choose_template, keeps_order

log = logging.getLogger("facet_probe.runners.hf")

DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
          "float32": torch.float32, "fp32": torch.float32}
SNAPSHOT_FILES = ["*.json", "*.safetensors", "*.jinja", "*.model", "*.txt", "*.py", "*.tiktoken"]
#: the files of a checkpoint folder that decide its outputs (not a model card, not a training log)
MODEL_FILES = ("*.safetensors", "*.bin", "*config.json", "tokenizer*", "*.jinja", "*.model", "*.tiktoken",
               "vocab*", "merges.txt", "*.py")


@dataclass
class Encoded:
    """One prompt ready for the model: token ids, [0,1] images (the attack variable), target span."""

    input_ids: torch.Tensor  # (L,) long, image placeholders expanded
    images01: list[torch.Tensor]  # one [0,1] float tensor per image, in display order
    token_fields: dict[str, torch.Tensor] = field(default_factory=dict)  # per-token extras, e.g. mm_token_type_ids
    prompt_len: int = 0  # tokens of the prompt; generation starts here
    target_span: tuple[int, int] | None = None  # [start, end) of target_text's tokens in input_ids
    text: str = ""  # the rendered prompt (chat template applied, placeholders not yet expanded)
    extras: dict[str, Any] = field(default_factory=dict)  # family-specific, e.g. precomputed pixels (Kimi-VL)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def target_ids(self) -> torch.Tensor:
        if self.target_span is None:
            raise ValueError("this prompt was encoded without a target_text")
        return self.input_ids[self.target_span[0]:self.target_span[1]]

    def prompt_only(self) -> Encoded:
        """The same encoding without the target continuation."""
        n = self.prompt_len
        return Encoded(self.input_ids[:n], self.images01, {k: v[:n] for k, v in self.token_fields.items()},
                       n, None, self.text, self.extras)


@dataclass
class Generated:
    """One row of a batched `generate`: its new tokens up to the first EOS, and how it stopped."""

    ids: list[int]  # new token ids, the EOS and anything after it removed
    stopped: bool  # True: an EOS ended it; False: max_new_tokens did
    width: int  # new tokens the batch generated for every row (EOS and padding included)


def _plain(value: Any) -> Any:
    """Hydra passes DictConfig; fingerprints and records want plain Python containers."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        return value
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def weights_digest(folder: Path) -> str:
    """sha256 (16 hex digits) of a checkpoint folder's model files (`MODEL_FILES`: weights, configs,
    tokenizer), by name and content; remembered per file size and modification time in this process."""
    files = sorted({p for pattern in MODEL_FILES for p in folder.glob(pattern) if p.is_file()})
    return _digest(tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))


@functools.cache
def _digest(files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for path, _, _ in files:
        with open(path, "rb") as fh:
            digest.update(Path(path).name.encode() + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()[:16]


#: files of which a checkpoint's tokenizer is made (one of them suffices)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "*.tiktoken", "tiktoken.model")


def tokenizer_files(folder: Path) -> list[str]:
    """The tokenizer files present in `folder` (`TOKENIZER_FILES`)."""
    return sorted({p.name for pattern in TOKENIZER_FILES for p in folder.glob(pattern) if p.is_file()})


def snapshot_commit(folder: Path) -> str | None:
    """The commit of a hub snapshot folder (`.../snapshots/<40 hex>`), else None."""
    name = folder.name
    is_commit = len(name) == 40 and all(c in "0123456789abcdef" for c in name)
    return name if folder.parent.name == "snapshots" and is_commit else None


def not_in_cache_message(name: str, model_id: str, revision: str | None, exc: BaseException) -> str:
    """Why a hub checkpoint could not be found, blaming HF_HUB_OFFLINE only when it is set."""
    from huggingface_hub import constants

    where = f"{model_id}@{revision or 'main'}"
    if constants.HF_HUB_OFFLINE:
        why = "downloads are off (HF_HUB_OFFLINE is set)"
    else:
        cause = str(exc.__cause__ or exc.__context__ or exc).strip().splitlines()
        why = f"the hub could not be reached or refused it ({cause[0][:160] if cause else type(exc).__name__})"
    return (f"{name}: {where} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and {why}. "
            f"Download it first (hf download {model_id}{f' --revision {revision}' if revision else ''}), "
            "or set model.local_path to a folder holding it.")


def chat_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Transformers chat messages: an optional system string, then each message's parts in display order
    (`{"type": "image"}` at each image slot). Also used by the tiny VLM's training data, so training sees
    exactly what the runner sends."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}] if prompt.system else []
    for m in prompt.messages:
        content = [{"type": "text", "text": p.text} if isinstance(p, TextPart) else {"type": "image"}
                   for p in m.parts if isinstance(p, TextPart | ImagePart)]
        msgs.append({"role": m.role, "content": content})
    return msgs


# --- the base runner --------------------------------------------------------------------------------------

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


class HFRunner:
    """A local HuggingFace VLM behind the `Runner` protocol, plus the attack-facing interface."""

    family: ClassVar[str] = "hf"
    image_placeholder: ClassVar[str] = "<image>"  # what the chat template emits for one image
    think_tags: ClassVar[tuple[str, str] | None] = None  # (open, close) when the family emits a trace
    trust_remote_code: ClassVar[bool] = False
    untested_offline: ClassVar[bool] = False  # True where no offline model exercises the adapter (Kimi-VL)

    def __init__(self, *, name: str, model_id: str, revision: str | None = None, local_path: str | None = None,
                 generation: dict[str, Any] | None = None, dtype: str = "bfloat16", quantization: str = "off",
                 attn_implementation: str = "auto", batch_size: int = 8, device: str = "auto",
                 chat_template: str | None = None, image_processor_kwargs: dict[str, Any] | None = None,
                 context_check: ContextCheck | str = ContextCheck.LABEL,
                 placement: dict[str, Any] | None = None) -> None:
        generation, image_processor_kwargs = _plain(generation), _plain(image_processor_kwargs)
        self.name = name
        self.model_id = model_id
        self.revision = revision
        self.local_path = local_path
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
        self.placement_config = placement_config(name, _plain(placement))  # GPUs: one where it fits (placement.py)
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

    # --- family hooks ---------------------------------------------------------------------------------
    def _load_processor(self, folder: Path) -> None:
        """Set `self.tokenizer` and whatever the family needs to encode prompts."""
        raise NotImplementedError

    def _tokenize(self, text: str, images: list) -> tuple:
        """Rendered text + PIL images -> (input_ids (L,), per-token fields, images01[, extras])."""
        raise NotImplementedError

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

    # --- Runner protocol ------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        fp = {"runner": f"hf/{self.family}", "model_id": self.model_id, "revision": self.revision,
              "dtype": self.dtype, "quantization": self.quantization_used,
              "attn_implementation": self.attn_used or self.attn_implementation,
              "generation": self.effective_generation(),
              "chat_template_options": self.chat_template_options(),
              "image_processor_kwargs": self.image_processor_kwargs, **self._family_settings()}
        if self.weights is not None:  # known once loaded (`check_ready`), which the audit does first
            fp["weights"] = self.weights
        if self.chat_template is not None:
            fp["chat_template_sha256"] = hashlib.sha256(self.chat_template.encode()).hexdigest()[:16]
        return fp

    @property
    def attn_used(self) -> str | None:
        """The attention implementation the loaded model runs (`config._attn_implementation`); None before load."""
        return self.provenance.get("attn_implementation") if self.model is not None else None

    def legacy_fingerprints(self) -> list[dict[str, Any]]:
        """Fingerprints older stores hold for these same calls, each with the provenance a stored record must
        show to count as one: before issue 28 the fingerprint named the configured attention ("auto"), so a
        record made under it is this run's call only if its provenance names the implementation used now."""
        used = self.attn_used
        if used is None or used == self.attn_implementation:
            return []
        return [{"fingerprint": {**self.fingerprint(), "attn_implementation": self.attn_implementation},
                 "provenance": {"attn_implementation": used}}]

    def preflight(self) -> None:
        """The checkpoint folder is there (local path or local hub cache) with a tokenizer, and the device exists;
        loads no weights."""
        if self._setup_error is not None:
            raise self._setup_error
        folder, _ = self._resolve_folder()
        self._check_tokenizer(folder)
        self._device_map()

    def _check_tokenizer(self, folder: Path) -> None:
        """Load the folder's tokenizer (seconds) before any weights (minutes), so that a folder without one
        fails with the true cause rather than transformers' hint about sentencepiece."""
        from transformers import AutoTokenizer

        if not tokenizer_files(folder):
            raise RunnerError(f"{self.name}: {folder} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): the "
                              "checkpoint was saved or downloaded without its tokenizer. Copy them in (or download "
                              f"the full snapshot: hf download {self.model_id}).")
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
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        """Answer every request, batched; yield each batch's responses as soon as it completes."""
        self.check_ready()
        requests = list(requests)
        if self.context_check == ContextCheck.LABEL:
            self.check_cells_fit(requests)
        window = max(32, 8 * self.batch_size)  # bounds memory held by encoded images
        for start in range(0, len(requests), window):
            yield from self._generate_window(requests[start:start + window])

    def check_cells_fit(self, requests: Sequence[Request], sample: int = 16) -> None:
        """Encode up to `sample` prompts of each cell (`Request.metadata["cell"]`, else one cell) and stop with
        a `RunnerError` naming what to change when most of them cannot fit the context."""
        cells: dict[str, list[Request]] = {}
        for req in requests:
            group = cells.setdefault(str(req.metadata.get("cell", "(all)")), [])
            if len(group) < sample:
                group.append(req)
        for cell, reqs in cells.items():
            fits = []
            for req in reqs:
                try:
                    fits.append(self.fit_of(self.encode(req.prompt)))
                except Exception:  # an encoding failure is labelled per trial later
                    continue
            if most_do_not_fit(fits):
                raise RunnerError(cell_overflow_message(self.name, cell, fits, self._context_hints()))

    def fit_of(self, encoded: Encoded) -> Fit:
        """The prompt's tokens (text + image) and the generation budget against the model's positions."""
        return Fit(len(encoded), sum(self.image_token_counts(encoded)),
                   int(self.effective_generation()["max_new_tokens"]), context_limit(self.model.config))

    def _context_hints(self) -> list[str]:
        """What shrinks this family's prompts (e.g. fewer tiles per image); the base knows none."""
        return []

    def image_token_id(self) -> int | None:
        """The token id that stands for image features in the input ids (config names differ by family)."""
        cfg = self.model.config
        for attr in ("image_token_id", "image_token_index", "media_placeholder_token_id"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int):
                return value
        return None

    def image_token_counts(self, encoded: Encoded) -> list[int]:
        """Image tokens per image, in display order: the lengths of the runs of the image token id."""
        token = self.image_token_id()
        if token is None:
            return []
        runs, n = [], 0
        for t in encoded.prompt_only().input_ids.tolist():
            if t == token:
                n += 1
            elif n:
                runs.append(n)
                n = 0
        return [*runs, n] if n else runs

    def image_record(self, encoded: Encoded) -> dict[str, Any]:
        """What each image became for the model: its image tokens and the pixel shape it was resized to."""
        shapes = [list(x.shape) for x in encoded.images01] or [
            list(v.shape) for k, v in encoded.extras.items() if k == "pixel_values"]
        return {"image_tokens": self.image_token_counts(encoded), "image_pixels": shapes}

    # --- attack-facing interface ----------------------------------------------------------------------
    def encode(self, prompt: Prompt, target_text: str | None = None) -> Encoded:
        """Token ids, [0,1] images and (optionally) the target span for one prompt."""
        self.check_ready()
        text = self.render(prompt)
        images = [ref.to_pil() for ref in prompt.images()]
        ids, fields, images01, *extras = self._tokenize(text, images)
        enc = Encoded(ids, images01, fields, int(ids.shape[0]), None, text, extras[0] if extras else {})
        if target_text is not None:
            tids = torch.tensor(self.tokenizer(target_text, add_special_tokens=False)["input_ids"], dtype=ids.dtype)
            if tids.numel() == 0:
                raise ValueError("target_text tokenises to nothing")
            enc.input_ids = torch.cat([ids, tids])
            enc.token_fields = {k: torch.cat([v, v.new_zeros(tids.shape[0])]) for k, v in fields.items()}
            enc.target_span = (len(ids), len(ids) + len(tids))
        return enc

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
                       settings: dict[str, Any], seeds: Sequence[int] | None = None) -> list[Generated]:
        """One left-padded `generate` over the prompt parts of `encoded` (the audit's and the attack's
        generation): greedy, or with `seeds` each row sampled from its own generator (`SeededSampler`)."""
        self.check_ready()
        cfg = self._generation_config(settings)
        extra = {}
        if seeds is not None:
            from transformers import LogitsProcessorList

            extra["logits_processor"] = LogitsProcessorList([SeededSampler(
                list(seeds), temperature=settings["temperature"], top_p=settings.get("top_p"),
                top_k=settings.get("top_k"), device=self.input_device)])
        with torch.no_grad():
            batch = self._collate(encoded, pixel_inputs, prompt_only=True)
            out = self.model.generate(**batch, generation_config=cfg, **extra)
        new = out[:, batch["input_ids"].shape[1]:].cpu()
        return [Generated(ids := self._until_eos(row, cfg), len(ids) < row.shape[0], int(row.shape[0]))
                for row in new]

    # --- shared helpers -------------------------------------------------------------------------------
    @property
    def input_device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    @property
    def compute_dtype(self) -> torch.dtype:
        return self.model.dtype

    def render(self, prompt: Prompt) -> str:
        """The prompt through the chat template, images at their displayed slots, generation prompt added."""
        return self.tokenizer.apply_chat_template(self.chat_messages(prompt), chat_template=self._template,
                                                  add_generation_prompt=True, tokenize=False,
                                                  **self.chat_template_options())

    def chat_messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        """The family's chat messages for `prompt` (the shared conversion unless a family overrides it)."""
        return chat_messages(prompt)

    def add_special_tokens_for(self, text: str) -> bool:
        """Let the tokenizer add BOS only when the template did not (as transformers' processors do)."""
        bos = self.tokenizer.bos_token
        return not (bos and text.startswith(bos))

    def to_model(self, x: torch.Tensor) -> torch.Tensor:
        """Move a float tensor to the model's device and dtype (differentiably)."""
        return x.to(device=self.input_device, dtype=self.compute_dtype)

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
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            path = Path(snapshot_download(self.model_id, revision=self.revision, allow_patterns=SNAPSHOT_FILES))
        except LocalEntryNotFoundError as exc:
            raise RunnerError(not_in_cache_message(self.name, self.model_id, self.revision, exc)) from exc
        return path, snapshot_commit(path)

    def weights_id(self) -> str:
        """What names the weights: a hub snapshot's commit, else the digest of the folder's model files
        (`weights_digest`), so that other weights under the same name and path (a retrained tiny VLM)
        never reuse stored trials or attack results."""
        folder, commit = self._resolve_folder()
        return commit or weights_digest(folder)

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

            return placement.device_map_for(self), dev  # the decision: self.placement (for the provenance)
        return {"": dev}, dev

    def _load(self) -> None:
        folder, commit = self._resolve_folder()
        self.folder = folder
        self._check_tokenizer(folder)  # before the weights: a missing tokenizer costs seconds, not minutes
        self.weights = commit or weights_digest(folder)
        flash_ok, flash_reason = flash_attention_status()
        candidates, attn_note = resolve_attention(self.attn_implementation, flash_ok=flash_ok,
                                                  flash_reason=flash_reason)
        device_map, device = self._device_map()
        kwargs: dict[str, Any] = {"device_map": device_map, "trust_remote_code": self.trust_remote_code}
        kwargs["dtype"] = "auto" if self.dtype == "auto" else DTYPES[self.dtype]
        if self.quantization_used == "nf4":
            kwargs["quantization_config"] = nf4_config()
        notes = [n for n in (self._quant_note, attn_note) if n]
        model, used = None, None
        for i, impl in enumerate(candidates):
            try:
                model = self._model_loader().from_pretrained(folder, attn_implementation=impl, **kwargs)
                used = impl
                break
            except (ValueError, ImportError) as exc:
                msg = str(exc)
                if i == len(candidates) - 1 or not (impl in msg or "attention" in msg.lower() or "attn" in msg):
                    raise
                notes.append(f"{impl} not supported by this model ({msg.splitlines()[0][:160]}); "
                             f"trying {candidates[i + 1]}")
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
        model.eval().requires_grad_(False)  # gradients only ever flow to pixels
        self.model = model
        self._load_processor(folder)
        self._template = self._choose_template()
        config_file = folder / "config.json"
        self.provenance = {
            "model_id": self.model_id, "revision": self.revision, "commit": commit or snapshot_commit(
                folder.resolve()) or getattr(model.config, "_commit_hash", None), "local_path": self.local_path,
            "weights": self.weights,
            "config_sha256": hashlib.sha256(config_file.read_bytes()).hexdigest()[:16],
            "dtype": str(model.dtype).removeprefix("torch."), "quantization": self.quantization_used,
            "attn_implementation": getattr(model.config, "_attn_implementation", used) or used,
            "device": str(self.input_device), "device_name": (torch.cuda.get_device_name(self.input_device)
                                                              if self.input_device.type == "cuda" else platform.machine()),
            "chat_template": self._template_label, "notes": notes, "versions": library_versions(),
            "placement": self.placement,
        }

    def _choose_template(self) -> str:
        """The configured template, else the checkpoint's, provided it keeps images at their slots
        (`templates.choose_template`, shared with the vLLM runner)."""
        template, self._template_label = choose_template(
            self.name, self.family, self.chat_template,
            checkpoint_template(self.tokenizer, self.processor, self.folder), self._fallback_template(),
            self._keeps_order, self.folder)
        return template

    def _keeps_order(self, template: str) -> bool:
        """Render text, image, text, image, text and check the five pieces come out in that order."""
        return keeps_order(self.tokenizer, template, self.image_placeholder, self.chat_template_options())

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

    def _collate(self, encs: Sequence[Encoded], pixels: Sequence[dict[str, torch.Tensor]], *,
                 prompt_only: bool, side: str = "left") -> dict[str, torch.Tensor]:
        """Pad token ids, mask and per-token fields (left for generation, right for teacher forcing);
        concatenate pixel inputs in batch order."""
        rows = [e.prompt_only() if prompt_only else e for e in encs]
        width = max(len(e) for e in rows)
        dev = self.input_device
        ids = torch.full((len(rows), width), self._pad_id(), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        fields = {k: torch.zeros((len(rows), width), dtype=v.dtype) for k, v in rows[0].token_fields.items()}
        for i, e in enumerate(rows):
            span = slice(width - len(e), width) if side == "left" else slice(0, len(e))
            ids[i, span] = e.input_ids
            mask[i, span] = 1
            for k, v in e.token_fields.items():
                fields[k][i, span] = v
        batch = {"input_ids": ids.to(dev), "attention_mask": mask.to(dev), **{k: v.to(dev) for k, v in fields.items()}}
        keys = {k for p in pixels for k in p}
        for k in sorted(keys):
            batch[k] = torch.cat([p[k] for p in pixels if k in p], dim=0)
        return batch

    def _sampling(self) -> bool:
        return float(self.effective_generation().get("temperature") or 0.0) > 0

    def _generate_window(self, requests: list[Request]) -> Iterator[tuple[Request, Response]]:
        ready: list[tuple[Request, Encoded]] = []
        for req in requests:
            try:
                enc = self.encode(req.prompt)
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
        generated = self.generate_batch([e for _, e in batch], [self._model_pixels(e) for _, e in batch], settings,
                                        seeds)
        latency = time.perf_counter() - t0
        results = []
        for (req, enc), gen in zip(batch, generated, strict=True):
            raw = self.tokenizer.decode(gen.ids, skip_special_tokens=True)
            text, thinking, truncated = raw.strip(), None, False
            if self.think_tags is not None:
                opened = enc.text.rstrip().endswith(self.think_tags[0])
                text, thinking, truncated = split_thinking(raw, *self.think_tags, prompt_opened=opened)
            prov = {**self.provenance, "batch_size": len(batch), "seed": request_seed(req) if seeds else None,
                    "stop_reason": "eos" if gen.stopped else "length", "thinking_truncated": truncated,
                    "generation": settings, "image_sha256": [ref.sha256 for ref in req.prompt.images()],
                    **self.image_record(enc)}
            results.append((req, Response(text=text, thinking=thinking, latency_s=latency, provenance=prov,
                                          usage={"prompt_tokens": enc.prompt_len,
                                                 "completion_tokens": min(len(gen.ids) + 1, gen.width)})))
        yield from results

    def _error(self, req: Request, message: str, extra: dict[str, Any] | None = None) -> Response:
        return Response(text="", error=message, provenance={
            **self.provenance, "image_sha256": [r.sha256 for r in req.prompt.images()], **(extra or {})})
