"""Issue 41 (8), vLLM's offline engine: sized from the run's own prompts, a context guard before the engine, a
failing window bisected, each request's own latency, the quantisation served.

No vLLM and no GPU here. `StandInVLLM` is a module installed as `vllm` for the test: `LLM` and `SamplingParams`
with vLLM 0.30's shapes (its `EngineArgs` / `SamplingParams` names, `LLM.model_config`, `LLM.generate(prompts,
sampling_params, *, use_tqdm)` returning `RequestOutput`s with `outputs[0].text/token_ids/finish_reason`,
`prompt_token_ids` and `metrics` (queued_ts, last_token_ts) when stats are kept) and its behaviour where it
matters here: every prompt of a call is checked before any runs, and one it rejects fails the whole call
(`_render_and_add_requests` aborts the ones added); a prompt past `max_model_len` is rejected with vLLM's own
message. The runner is the real one on a tiny LLaVA checkpoint. The helpers this issue added are read from the
module (`vllm_engine.x`), so each test fails on its own assertion where they are missing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import math
import os
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from facet_probe.core.items import ImageRef  # noqa: E402
from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart  # noqa: E402
from facet_probe.runners import vllm_engine  # noqa: E402
from facet_probe.runners.base import Request, RunnerError, generate_all  # noqa: E402
from facet_probe.runners.hf.llava import LlavaRunner  # noqa: E402
from facet_probe.runners.vllm_engine import VLLMRunner  # noqa: E402
from facet_probe_dev.testing.tiny_models import random_image, tiny_model_path  # noqa: E402

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                                reason="a stand-in is installed as `vllm`: only where vLLM is absent")

# vllm.engine.arg_utils.EngineArgs (0.30.0) fields the runner or a config may pass
ENGINE_ARGS = {"model", "tokenizer", "dtype", "trust_remote_code", "seed", "limit_mm_per_prompt", "max_model_len",
               "disable_log_stats", "mm_processor_kwargs", "quantization", "tensor_parallel_size",
               "gpu_memory_utilization", "enforce_eager", "max_num_seqs"}
# vllm.SamplingParams fields the runner may set
SAMPLING_FIELDS = {"n", "temperature", "top_p", "top_k", "seed", "max_tokens", "min_tokens", "repetition_penalty"}
POISON = "<<the engine rejects this prompt>>"
# vLLM 0.30's messages (multimodal/processing/processor.py, v1/engine/input_processor.py)
REJECTED = ("Expected there to be 1 prompt updates corresponding to 1 image items, but instead found 0 prompt "
            "updates!")


@dataclass
class CompletionOutput:
    text: str
    token_ids: list[int]
    finish_reason: str = "stop"


@dataclass
class RequestStateStats:
    queued_ts: float = 0.0
    last_token_ts: float = 0.0


@dataclass
class RequestOutput:
    prompt: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    metrics: RequestStateStats | None = None


class SamplingParams:
    def __init__(self, **kwargs):
        unknown = set(kwargs) - SAMPLING_FIELDS
        if unknown:
            raise TypeError(f"SamplingParams got unexpected keyword arguments {sorted(unknown)}")
        self.kwargs = kwargs


@dataclass
class ModelConfig:
    max_model_len: int
    quantization: str | None


@dataclass
class LLM:
    """`vllm.LLM`'s shape; engine timings on a clock of its own (1 s per request answered)."""

    kwargs: dict
    calls: list[list[str]] = field(default_factory=list)
    clock: float = 100.0

    def __init__(self, **kwargs):
        unknown = set(kwargs) - ENGINE_ARGS
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {sorted(unknown)}")
        from transformers import AutoTokenizer

        self.kwargs, self.calls, self.clock = kwargs, [], 100.0
        config = json.loads((Path(kwargs["model"]) / "config.json").read_text())
        context = config["text_config"]["max_position_embeddings"]
        self.model_config = ModelConfig(kwargs.get("max_model_len") or context, kwargs.get("quantization") or (
            config.get("quantization_config") or {}).get("quant_method"))
        self.tokenizer = AutoTokenizer.from_pretrained(kwargs["tokenizer"])
        StandInVLLM.engines.append(self)

    def generate(self, prompts, sampling_params, *, use_tqdm=True):
        assert len(prompts) == len(sampling_params) and use_tqdm is False
        self.calls.append([p["prompt"] for p in prompts])
        limit = self.kwargs["limit_mm_per_prompt"]["image"]
        ids = []
        for p in prompts:  # every prompt checked before any runs: one bad prompt fails the call
            n = len((p.get("multi_modal_data") or {}).get("image", []))
            if n > limit:
                raise ValueError(f"At most {limit} image(s) may be provided in one prompt.")
            if POISON in p["prompt"]:
                raise RuntimeError(REJECTED)
            ids.append(self.tokenizer(p["prompt"])["input_ids"])
            if len(ids[-1]) > self.model_config.max_model_len:
                raise ValueError(f"The decoder prompt (length {len(ids[-1])}) is longer than the maximum model "
                                 f"length of {self.model_config.max_model_len}.")
        stats = not self.kwargs.get("disable_log_stats", True)
        out = []
        for i, (p, prompt_ids) in enumerate(zip(prompts, ids, strict=True)):
            metrics = RequestStateStats(self.clock, self.clock + i + 1) if stats else None
            out.append(RequestOutput(p["prompt"], prompt_ids, [CompletionOutput("The answer is (A)", [5, 6, 7])],
                                     metrics))
        self.clock += len(prompts) + 1
        return out


class ModelRegistry:
    @staticmethod
    def get_supported_archs():
        return ["LlavaForConditionalGeneration", "Qwen3_5ForConditionalGeneration"]


class StandInVLLM:
    engines: list[LLM] = []


@pytest.fixture
def stand_in_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM, module.SamplingParams, module.ModelRegistry = LLM, SamplingParams, ModelRegistry
    monkeypatch.setitem(sys.modules, "vllm", module)
    StandInVLLM.engines = []
    return StandInVLLM


@pytest.fixture(scope="module")
def llava_folder(tiny_root):
    return tiny_model_path("llava", tiny_root)


@pytest.fixture(scope="module")
def long_context_folder(llava_folder, tmp_path_factory):
    """The tiny LLaVA declaring Qwen3.5's 262,144 positions (its weights linked, never loaded here): the context
    vLLM would size its KV cache for when told no `max_model_len`."""
    folder = tmp_path_factory.mktemp("long_context") / "llava"
    folder.mkdir()
    for f in llava_folder.iterdir():
        (folder / f.name).symlink_to(f)
    config = json.loads((llava_folder / "config.json").read_text())
    config["text_config"]["max_position_embeddings"] = 262_144
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _runner(folder: Path, **kw) -> VLLMRunner:
    hf = LlavaRunner(name="tiny_llava", model_id="tiny/llava", local_path=str(folder), dtype="float32",
                     generation={"max_new_tokens": 6})
    return VLLMRunner(name="vllm_tiny", hf=hf, fallback="refuse", **kw)


def _image(seed: int) -> ImageRef:
    return ImageRef.from_bytes(random_image(40, 36, seed))


def _request(i: int, text: str = "", images: int = 1, cell: str = "option_order/synthetic") -> Request:
    parts = [TextPart(f"Question {i}. {text}")]
    parts += [ImagePart(_image(i * 10 + j)) for j in range(images)]
    parts.append(TextPart("A or B?"))
    return Request(key=f"k{i}", prompt=Prompt(system="Answer with the letter.", messages=(
        Message("user", tuple(parts)),)), metadata={"cell": cell})


# --------------------------------------------------------------------------------------------- pure functions

def test_max_model_len_is_the_longest_prompt_plus_the_reply_rounded_up_and_capped_at_the_context():
    assert vllm_engine.sized_max_model_len(700, 512, 262_144) == 2048  # not Qwen3.5's 262k
    assert vllm_engine.sized_max_model_len(1536, 512, 262_144) == 2048  # exactly a multiple: no more
    assert vllm_engine.sized_max_model_len(1537, 512, 262_144) == 3072
    assert vllm_engine.sized_max_model_len(3000, 2048, 4096) == 4096  # capped at the model's context
    assert vllm_engine.sized_max_model_len(10, 6, None) == vllm_engine.MAX_MODEL_LEN_MULTIPLE


def test_the_multimodal_limits_are_the_runs_most_images_and_no_video():
    assert vllm_engine.mm_limits(3) == {"image": 3, "video": 0}
    assert vllm_engine.mm_limits(0) == {"image": 0, "video": 0}


def test_the_quantisation_served_comes_from_the_engine_args_else_the_checkpoint():
    assert vllm_engine.quantization_of({}, {}) == "none"
    assert vllm_engine.quantization_of({"quantization_config": {"quant_method": "awq", "bits": 4}}, {}) == "awq"
    assert vllm_engine.quantization_of({"quantization_config": {"quant_method": "awq"}}, {"quantization": "fp8"}) == "fp8"


def test_a_failing_call_is_bisected_and_each_item_gets_the_seconds_of_its_own_call():
    ticks = iter(range(1000))
    calls = []

    def call(batch):
        calls.append(list(batch))
        if 11 in batch:
            raise RuntimeError("bad input")
        return [x * 10 for x in batch]

    out = list(vllm_engine.bisect_calls(list(range(16)), call, clock=lambda: float(next(ticks))))
    assert [item for item, _, _ in out] == list(range(16))  # item order kept
    assert [r for _, r, _ in out if not isinstance(r, Exception)] == [x * 10 for x in range(16) if x != 11]
    [(bad, exc, _)] = [o for o in out if isinstance(o[1], Exception)]
    assert bad == 11 and str(exc) == "bad input"
    assert len(calls) == 1 + 2 * math.ceil(math.log2(16))  # 9 calls, not 1 + 16
    assert all(seconds == 1.0 for _, _, seconds in out)  # its own call's time, never the window's so far


# --------------------------------------------------------------------------------------------- the runner

def test_the_engine_is_sized_from_the_runs_prompts(stand_in_vllm, long_context_folder):
    runner = _runner(long_context_folder)
    requests = [_request(0, images=1), _request(1, "a longer question " * 150, images=2), _request(2, images=0)]
    out = generate_all(runner, requests)
    assert all(r.error is None for r in out.values())
    [engine] = stand_in_vllm.engines
    # the run's most images, not 16; no video: vLLM's default (999) would reserve Qwen3.5's and InternVL's video budget
    assert engine.kwargs["limit_mm_per_prompt"] == {"image": 2, "video": 0}
    counted = {c.request.key: c.fit for c in runner.count(requests)}
    longest = max(f.prompt_tokens for f in counted.values())
    assert 1024 < longest < 2042  # so the run needs 2048 positions, not the 262,144 the model declares
    assert engine.kwargs.get("max_model_len") == 2048 == runner.provenance["max_model_len"]
    assert engine.model_config.max_model_len == 2048
    # the count is the HF adapter's own encoding of what vLLM is sent (text and image tokens)
    hf = LlavaRunner(name="hf", model_id="tiny/llava", local_path=str(long_context_folder), dtype="float32")
    prompt = runner.build_prompt(requests[1])
    assert counted["k1"].prompt_tokens == len(hf_encoded(hf, prompt)) and counted["k1"].image_tokens > 0


def test_engine_args_win_over_the_sizes_taken_from_the_prompts(stand_in_vllm, llava_folder):
    runner = _runner(llava_folder, engine_args={"max_model_len": 512, "limit_mm_per_prompt": {"image": 3}})
    out = generate_all(runner, [_request(0, images=1), _request(9, "a longer question " * 150)])
    [engine] = stand_in_vllm.engines
    assert engine.kwargs["max_model_len"] == 512
    assert engine.kwargs["limit_mm_per_prompt"] == {"image": 3, "video": 0}  # per modality: video stays off
    assert out["k0"].error is None
    # the guard counts against the user's max_model_len (the prompt fits the model's 1024 positions), never sent
    assert out["k9"].error.startswith("context_overflow: ") and "512 positions" in out["k9"].error
    assert len(engine.calls) == 1 and len(engine.calls[0]) == 1


def test_qwen35_prompts_are_counted_with_the_image_processors_own_image_tokens(stand_in_vllm, tiny_root):
    """What `max_model_len` is sized from, counted independently: the text tokens of the rendered prompt (one
    `<|image_pad|>` per image) plus, per image, the library image processor's grid / merge^2 tokens."""
    from transformers import AutoTokenizer
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    from facet_probe.runners.hf.qwen import QwenRunner

    folder = tiny_model_path("qwen3_5", tiny_root)
    hf = QwenRunner(name="q", model_id="tiny/q", local_path=str(folder), dtype="float32",
                    generation={"max_new_tokens": 6})
    runner = VLLMRunner(name="vllm_q", hf=hf, fallback="refuse")
    runner.check_ready()
    request = Request(key="k", prompt=Prompt(system="Answer.", messages=(Message("user", (
        TextPart("Compare"), ImagePart(ImageRef.from_bytes(random_image(200, 120, 1))), TextPart("and"),
        ImagePart(ImageRef.from_bytes(random_image(48, 300, 2))), TextPart("A or B?"))),)))
    prompt = runner.build_prompt(request)
    processor = Qwen2VLImageProcessorPil.from_pretrained(folder)
    grids = processor(images=prompt["multi_modal_data"]["image"])["image_grid_thw"]
    image_tokens = int((grids.prod(-1) // processor.merge_size ** 2).sum())
    text_tokens = len(AutoTokenizer.from_pretrained(folder)(prompt["prompt"])["input_ids"]) - 2  # the two pads
    [counted] = runner.count([request])
    assert counted.fit.image_tokens == image_tokens > 2
    assert counted.fit.prompt_tokens == text_tokens + image_tokens
    assert runner.size_for([counted]).max_model_len == vllm_engine.sized_max_model_len(
        text_tokens + image_tokens, 6, 1024)


def hf_encoded(hf: LlavaRunner, prompt: dict) -> torch.Tensor:
    hf.check_ready()
    return hf.tokenize(prompt["prompt"], prompt.get("multi_modal_data", {}).get("image", []))[0]


def test_a_prompt_past_the_context_is_a_context_overflow_for_that_trial_before_the_engine(stand_in_vllm,
                                                                                            llava_folder):
    runner = _runner(llava_folder)
    long = _request(9, "word " * 1200)
    out = generate_all(runner, [_request(0), long, _request(1)])
    assert out["k9"].error.startswith("context_overflow: the prompt is ") and "not attempted" in out["k9"].error
    assert out["k9"].provenance["prompt_tokens"] > 1024
    assert out["k9"].provenance["engine"] == "vllm" and out["k9"].provenance["quantization"] == "none"
    assert out["k0"].error is None and out["k1"].error is None
    [engine] = stand_in_vllm.engines
    assert all("word word" not in p for call in engine.calls for p in call)  # never sent


def test_a_cell_whose_prompts_mostly_cannot_fit_stops_before_any_call(stand_in_vllm, llava_folder):
    runner = _runner(llava_folder)
    with pytest.raises(RunnerError, match=r"2 of 3 sampled prompts of cell long/cell cannot fit"):
        list(runner.generate([_request(i, "word " * 1200 if i else "", cell="long/cell") for i in range(3)]))
    assert stand_in_vllm.engines == []


def test_one_bad_prompt_is_isolated_by_bisection_and_every_request_records_its_own_latency(stand_in_vllm,
                                                                                            llava_folder):
    runner = _runner(llava_folder, window=16)
    requests = [_request(i, POISON if i == 11 else "") for i in range(16)]
    pairs = list(runner.generate(requests))
    assert [req.key for req, _ in pairs] == [r.key for r in requests]
    out = {req.key: resp for req, resp in pairs}
    assert out["k11"].error == f"generation: RuntimeError: {REJECTED}"
    good = [out[f"k{i}"] for i in range(16) if i != 11]
    assert all(r.error is None and r.text == "The answer is (A)" for r in good)
    [engine] = stand_in_vllm.engines
    assert len(engine.calls) <= 1 + 2 * math.ceil(math.log2(16))  # was 1 + 16 (one at a time)
    # each request's own engine timing (queued -> last token), not the time since its window began
    assert all(r.provenance["latency"] == "request" for r in good)
    # calls answered: keys 0-7 (8 at once), 8-9, 10, 12-15; the stand-in's engine takes 1 s per request
    assert [r.latency_s for r in good] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 1.0, 1.0, 2.0, 3.0, 4.0]


def test_the_quantisation_served_is_recorded(stand_in_vllm, llava_folder):
    runner = _runner(llava_folder, engine_args={"quantization": "fp8"})
    assert runner.fingerprint()["quantization"] == "fp8"
    resp = generate_all(runner, [_request(0)])["k0"]
    assert resp.provenance["quantization"] == "fp8"
    assert _runner(llava_folder).fingerprint()["quantization"] == "none"


def test_each_vllm_config_says_whether_vllm_030_serves_its_architecture_as_the_registry_table_does():
    """The one line per config and the docs' row are checked against `VLLM_030_REGISTRY` (read from the 0.30.0
    wheel's registry.py); where a folder is shipped or built here, against its `config.json` too."""
    registry = vllm_engine.VLLM_030_REGISTRY
    section = (ROOT / "docs" / "hf_models.md").read_text().split("## vLLM")[1]
    rows = {name: row for row in section.splitlines() if row.startswith("| `vllm_")
            for name in re.findall(r"`(vllm_\w+)`", row.split("|")[1])}
    configs = sorted(p for p in (ROOT / "facet_probe" / "conf" / "model").glob("vllm_*.yaml") if p.stem != "vllm_server")
    assert configs and set(rows) == {p.stem for p in configs}
    for path in configs:
        [line] = [x for x in path.read_text().splitlines() if "vLLM 0.30.0's model registry" in x]
        arch, module = re.search(r"serves (\w+) \(models/(\w+)\.py\)", line).groups()
        assert registry[arch] == module, path.name
        assert f"`{arch}`" in rows[path.stem] and f"`{module}.py`" in rows[path.stem], path.stem
    assert json.loads((ROOT / "facet_probe" / "assets" / "tiny_vlm" / "config.json").read_text())["architectures"] \
        == [re.search(r"serves (\w+)", (ROOT / "facet_probe" / "conf" / "model" / "vllm_tiny_vlm.yaml").read_text())[1]]


def test_an_architecture_vllm_030_lacks_runs_on_hf_even_where_vllm_is_absent(llava_folder):
    hf = LlavaRunner(name="hf", model_id="tiny/llava", local_path=str(llava_folder), dtype="float32")
    for arch in ("InstructBlipForConditionalGeneration", "IdeficsForVisionText2Text"):
        assert vllm_engine.unservable_reason(hf, [arch], None) == f"vLLM 0.30.0 has no implementation of {[arch]}"
    assert vllm_engine.unservable_reason(hf, ["LlavaForConditionalGeneration"], None) is None
    assert vllm_engine.unservable_reason(hf, ["SomeNewForConditionalGeneration"], None) is None  # unknown: vLLM decides


def test_a_fixed_reply_length_is_served_by_vllm_as_min_tokens(stand_in_vllm, llava_folder):
    """`min_new_tokens` (the GPU check fixes the reply length with it, fallback off) is vLLM's `min_tokens`."""
    hf = LlavaRunner(name="tiny_llava", model_id="tiny/llava", local_path=str(llava_folder), dtype="float32",
                     generation={"max_new_tokens": 6, "min_new_tokens": 6})
    runner = VLLMRunner(name="vllm_tiny", hf=hf, fallback="refuse")
    assert generate_all(runner, [_request(0)])["k0"].error is None
    assert runner.engine == "vllm" and runner.sampling_settings()["min_tokens"] == 6
