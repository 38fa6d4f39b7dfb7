"""Issue 28, vLLM: the offline-engine runner short of running the engine (no vLLM, no GPU here), and the
server path through the real openai SDK against the loopback fake provider.

The inputs are checked against vLLM's documented input schema (vllm.inputs.TextPrompt: `prompt: str`,
`multi_modal_data: NotRequired[MultiModalDataDict]` with `"image"` one image or a list of them,
`mm_processor_kwargs: NotRequired[dict]`; vllm.SamplingParams' fields), written out here as data.
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from PIL import Image  # noqa: E402

from facet_probe.config.loading import load_option  # noqa: E402
from facet_probe.config.schema import register  # noqa: E402
from facet_probe.core.items import ImageRef  # noqa: E402
from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart  # noqa: E402
from facet_probe.runners.base import Request, RunnerError, generate_all  # noqa: E402
from facet_probe.runners.hf.gemma3 import Gemma3Runner  # noqa: E402
from facet_probe.runners.hf.llava import LlavaRunner  # noqa: E402
from facet_probe.runners.hf.qwen import QwenRunner  # noqa: E402
from facet_probe.runners.vllm_engine import VLLMRunner, serve_command, unservable_reason  # noqa: E402
from facet_probe_dev.testing.fake_providers import FakeProviderServer  # noqa: E402
from facet_probe_dev.testing.tiny_models import random_image, tiny_model_path  # noqa: E402

torch.set_num_threads(1)
register()
ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "facet_probe" / "conf" / "model"
VLLM_CONFIGS = sorted(p.stem for p in CONF.glob("vllm_*.yaml") if p.stem != "vllm_server")

# vllm.inputs.TextPrompt (documented): required and optional keys
TEXT_PROMPT_REQUIRED = {"prompt": str}
TEXT_PROMPT_OPTIONAL = {"multi_modal_data", "mm_processor_kwargs", "multi_modal_uuids", "cache_salt"}
# vllm.SamplingParams (documented constructor fields this runner may set)
SAMPLING_PARAMS_FIELDS = {"n", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "min_tokens",
                          "repetition_penalty", "presence_penalty", "frequency_penalty", "stop", "stop_token_ids",
                          "skip_special_tokens", "logprobs"}

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                                reason="these tests cover the CPU side with vLLM absent")


def check_text_prompt(prompt: dict, n_images: int, placeholder: str) -> None:
    """One vLLM TextPrompt as the docs define it, with one placeholder per image."""
    assert set(prompt) <= set(TEXT_PROMPT_REQUIRED) | TEXT_PROMPT_OPTIONAL, set(prompt)
    assert isinstance(prompt["prompt"], str)
    if n_images:
        mm = prompt["multi_modal_data"]
        assert set(mm) == {"image"} and isinstance(mm["image"], list) and len(mm["image"]) == n_images
        assert all(isinstance(im, Image.Image) for im in mm["image"])
    else:
        assert "multi_modal_data" not in prompt
    assert prompt["prompt"].count(placeholder) == n_images


def _png(seed: int, w: int, h: int) -> ImageRef:
    return ImageRef.from_bytes(random_image(w, h, seed))


RED, BLUE = _png(1, 48, 40), _png(2, 40, 48)
PROMPT = Prompt(system="Answer with the letter.", messages=(Message("user", (
    TextPart("First"), ImagePart(RED), TextPart("then"), ImagePart(BLUE), TextPart("Which came first?"))),))


def _hf(cls, family: str, tmp_root: Path, **kw):
    return cls(name=f"tiny_{family}", model_id=f"tiny/{family}", local_path=str(tiny_model_path(family, tmp_root)),
               dtype="float32", **kw)


@pytest.mark.parametrize(("cls", "family", "placeholder", "kw"), [
    (LlavaRunner, "llava", "<image>", {}),
    (QwenRunner, "qwen3_5", "<|image_pad|>", {"thinking": False}),
    (Gemma3Runner, "gemma3", "<start_of_image>", {}),
])
def test_the_engine_inputs_follow_vllms_documented_schema_images_in_display_order(tiny_root, cls, family,
                                                                                   placeholder, kw):
    runner = VLLMRunner(name="v", hf=_hf(cls, family, tiny_root, **kw))
    runner.prepare_inputs()
    inputs = runner.build_prompt(Request(key="k", prompt=PROMPT))
    check_text_prompt(inputs, 2, placeholder)
    text = inputs["prompt"]
    assert text.index("First") < text.index(placeholder) < text.index("then") < text.rindex(placeholder) \
        < text.index("Which came first?")  # interleaved, in display order
    sent = [io.BytesIO() for _ in range(2)]
    for im, buf in zip(inputs["multi_modal_data"]["image"], sent, strict=True):
        im.save(buf, "PNG")
    assert [Image.open(b).tobytes() for b in sent] == [RED.to_pil().tobytes(), BLUE.to_pil().tobytes()]
    bos = runner.tokenizer.bos_token
    assert not (bos and text.startswith(bos))  # vLLM adds the tokenizer's BOS itself: never two
    kw_sampling = runner.sampling_kwargs(Request(key="k", prompt=PROMPT, seed=5))
    assert set(kw_sampling) <= SAMPLING_PARAMS_FIELDS
    assert kw_sampling["temperature"] == 0.0 and "seed" not in kw_sampling  # greedy
    assert kw_sampling["max_tokens"] == 512 and kw_sampling["n"] == 1
    text_only = runner.build_prompt(Request(key="t", prompt=Prompt(system="", messages=(
        Message("user", (TextPart("hi"),)),))))
    check_text_prompt(text_only, 0, placeholder)


def test_qwen35_thinking_goes_through_the_template_and_the_2048_budget(tiny_root):
    on = VLLMRunner(name="v", hf=_hf(QwenRunner, "qwen3_5", tiny_root, thinking=True))
    off = VLLMRunner(name="v", hf=_hf(QwenRunner, "qwen3_5", tiny_root, thinking=False))
    for r in (on, off):
        r.prepare_inputs()
    assert on.build_prompt(Request(key="k", prompt=PROMPT))["prompt"].endswith("<|im_start|>assistant\n<think>\n")
    assert off.build_prompt(Request(key="k", prompt=PROMPT))["prompt"].endswith("<think>\n\n</think>\n\n")
    assert on.sampling_settings()["max_tokens"] == 2048 and off.sampling_settings()["max_tokens"] == 512
    assert on.fingerprint()["chat_template_options"] == {"enable_thinking": True}


def test_the_checkpoints_template_choice_is_the_hf_runners(tiny_root):
    """llava-hf's template moves images before the text: LLaVA's own conversation format is used, as in HF."""
    runner = VLLMRunner(name="v", hf=_hf(LlavaRunner, "llava", tiny_root))
    runner.prepare_inputs()
    assert runner._template_label.startswith("facet_probe llava (checkpoint template reorders")
    assert runner.build_prompt(Request(key="k", prompt=PROMPT))["prompt"].startswith("Answer with the letter. USER:")


def test_without_vllm_refuse_names_the_extra_and_hf_fallback_answers_under_the_hf_fingerprint(tiny_root):
    hf = _hf(LlavaRunner, "llava", tiny_root, generation={"max_new_tokens": 3})
    with pytest.raises(RunnerError, match="vLLM is not installed") as refused:
        VLLMRunner(name="v", hf=hf, fallback="refuse").preflight()
    # the one supported way (issue 66): a server in vLLM's own venv, audited with model=vllm_server
    assert ("a venv of its own (python -m venv .venv-vllm && .venv-vllm/bin/pip install vllm==0.30.0; then "
            ".venv-vllm/bin/vllm serve tiny/llava --dtype bfloat16 --port 8000 --limit-mm-per-prompt "
            """'{"image": 16, "video": 0}'""") in str(refused.value)
    assert "model=vllm_server model.model_id=tiny/llava" in str(refused.value)
    assert "model.fallback=hf" in str(refused.value) and "beside the project's pins" not in str(refused.value)
    hf.revision = "0123abc"  # a pinned revision is served as pinned
    with pytest.raises(RunnerError, match="vllm serve tiny/llava --revision 0123abc "):
        VLLMRunner(name="v", hf=hf, fallback="refuse").preflight()
    hf.revision = None
    runner = VLLMRunner(name="v", hf=hf)
    runner.preflight()
    assert (runner.engine, runner.reason) == ("hf", "vLLM is not installed")
    runner.check_ready()
    assert runner.fingerprint() == hf.fingerprint()
    resp = generate_all(runner, [Request(key="k", prompt=PROMPT)])["k"]
    assert resp.error is None and resp.provenance["engine"] == "hf"
    assert resp.provenance["vllm_fallback"] == "vLLM is not installed"


def test_configs_vllm_cannot_serve_as_configured_say_why(tiny_root):
    nf4 = instantiate(load_option("model", "vllm_internvl35_8b"), _convert_="all")
    assert "NF4" in unservable_reason(nf4.hf, ["InternVLForConditionalGeneration"], None)
    tiles = instantiate(load_option("model", "vllm_internvl35_8b"), _convert_="all")
    tiles.hf.quantization_used, tiles.hf.max_tiles = "none", 1
    assert "max_tiles" in unservable_reason(tiles.hf, [], None)
    llava = _hf(LlavaRunner, "llava", tiny_root)
    assert unservable_reason(llava, ["LlavaForConditionalGeneration"], ["LlavaForConditionalGeneration"]) is None
    assert "no implementation" in unservable_reason(llava, ["LlavaForConditionalGeneration"], ["Other"])


@pytest.mark.parametrize("config", VLLM_CONFIGS)
def test_each_vllm_config_wraps_its_hf_config_and_has_a_documented_serve_command(config):
    node = load_option("model", config)
    hf_name = config.removeprefix("vllm_")
    assert node.hf == load_option("model", hf_name) and node.name == config
    docs = (ROOT / "docs" / "hf_models.md").read_text()
    if hf_name != "tiny_vlm":
        assert re.search(rf"`{hf_name}`.*vllm serve {re.escape(node.hf.model_id)} ", docs), hf_name
        assert serve_command(node.hf.model_id, "<sha>") in docs, hf_name  # what a refusal prints, no video


# ---------------------------------------------------------------- the vLLM server path

def _server_runner(url: str, **overrides):
    node = load_option("model", "vllm_server")
    node.base_url, node.model_id = url, "Qwen/Qwen3.5-9B"
    for key, value in overrides.items():
        node[key] = value
    return instantiate(node, _convert_="all")


def test_the_vllm_server_preset_sends_the_papers_settings_and_records_what_is_served(monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    root = "/models/models--Qwen--Qwen3.5-9B/snapshots/" + "ab" * 20
    cards = {"Qwen/Qwen3.5-9B": {"root": root, "max_model_len": 32768}}
    with FakeProviderServer(served_models=("Qwen/Qwen3.5-9B",), model_cards=cards) as srv:
        runner = _server_runner(srv.url + "/v1", thinking=False)
        runner.check_ready()
        resp = generate_all(runner, [Request(key="k", prompt=PROMPT)])["k"]
        body = srv.calls[-1].body
    assert body["max_tokens"] == 512 and body["temperature"] == 0.0  # not 8192
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert srv.calls[-1].image_digests() == [RED.sha256, BLUE.sha256]  # display order
    assert resp.provenance["served"] == {"id": "Qwen/Qwen3.5-9B", "root": root, "max_model_len": 32768,
                                         "owned_by": "fake", "revision": "ab" * 20}
    thinking = _server_runner("http://127.0.0.1:8000/v1", thinking=True)
    assert thinking.settings_sent["max_tokens"] == 2048
    assert thinking.fingerprint() != runner.fingerprint()
