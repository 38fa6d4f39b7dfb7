"""The open-weight panel's model configs: real hub ids, the paper's settings, and clear errors when absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

import facet_probe
from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.kimi_vl import KimiVLRunner

CONF = Path(facet_probe.__file__).parent / "conf" / "model"
PANEL = {
    "qwen35_0_8b": "Qwen/Qwen3.5-0.8B", "qwen35_2b": "Qwen/Qwen3.5-2B", "qwen35_4b": "Qwen/Qwen3.5-4B",
    "qwen35_9b": "Qwen/Qwen3.5-9B", "qwen35_27b": "Qwen/Qwen3.5-27B",
    "internvl35_4b": "OpenGVLab/InternVL3_5-4B-HF", "internvl35_8b": "OpenGVLab/InternVL3_5-8B-HF",
    "internvl35_14b": "OpenGVLab/InternVL3_5-14B-HF", "internvl35_38b": "OpenGVLab/InternVL3_5-38B-HF",
    "kimi_vl_a3b": "moonshotai/Kimi-VL-A3B-Instruct", "medgemma_4b": "google/medgemma-4b-it",
    "medgemma_27b": "google/medgemma-27b-it", "llava15_7b": "llava-hf/llava-1.5-7b-hf",
}
NF4_IN_PAPER = {"internvl35_4b", "internvl35_8b", "internvl35_14b", "internvl35_38b", "qwen35_27b", "medgemma_27b"}


def _load(name: str):
    return OmegaConf.load(CONF / f"{name}.yaml")


@pytest.mark.parametrize("name", sorted(PANEL))
def test_config_instantiates_its_adapter_with_the_paper_settings(name):
    cfg = _load(name)
    assert cfg.name == name and cfg.model_id == PANEL[name]
    runner = instantiate(cfg)  # no loading happens here
    assert isinstance(runner, HFRunner) and runner.name == name
    assert runner.dtype == "bfloat16" and runner.quantization == ("auto" if name in NF4_IN_PAPER else "off")
    fp = runner.fingerprint()
    assert fp["generation"] == {"max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0, "top_k": None,
                                "repetition_penalty": 1.0}
    assert fp["attn_implementation"] == "auto" and fp["model_id"] == PANEL[name]
    assert fp["quantization"] == ("nf4" if name in NF4_IN_PAPER else "none")  # bitsandbytes is installed here
    if name.startswith("qwen35"):
        assert fp["chat_template_options"] == {"enable_thinking": False}
        thinking = instantiate(cfg, thinking=True).fingerprint()
        assert thinking["chat_template_options"] == {"enable_thinking": True}
        assert thinking["generation"]["max_new_tokens"] == 2048


def test_a_hub_model_that_is_not_cached_offline_says_how_to_get_it(monkeypatch, tmp_path):
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path))
    runner = instantiate(_load("llava15_7b"))
    with pytest.raises(RunnerError, match="not in the local Hugging Face cache.*hf download llava-hf/llava-1.5-7b-hf"):
        runner.check_ready()


def test_a_local_path_without_a_checkpoint_is_a_clear_error(tmp_path):
    runner = instantiate(_load("medgemma_4b"), local_path=str(tmp_path))
    with pytest.raises(RunnerError, match="has no config.json"):
        runner.check_ready()


def test_kimi_vl_without_its_remote_code_fails_with_one_clear_message(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "kimi_vl", "auto_map": {
        "AutoConfig": "configuration_kimi_vl.KimiVLConfig",
        "AutoModelForCausalLM": "modeling_kimi_vl.KimiVLForConditionalGeneration"}}))
    runner = instantiate(_load("kimi_vl_a3b"), local_path=str(tmp_path))
    assert KimiVLRunner.untested_offline and runner.trust_remote_code
    with pytest.raises(RunnerError, match=r"remote code \(configuration_kimi_vl.py, modeling_kimi_vl.py\).*hf download"):
        runner.check_ready()
    with pytest.raises(NotImplementedError, match="no differentiable pixel path"):
        runner.pixel_inputs([])


def test_requiring_nf4_without_bitsandbytes_fails_at_check_ready(monkeypatch):
    from facet_probe.runners.hf import base

    monkeypatch.setattr(base, "quantization_status", lambda: (False, "bitsandbytes not installed"))
    runner = instantiate(_load("internvl35_8b"), quantization="require")
    assert runner.fingerprint()["quantization"] == "unavailable"
    with pytest.raises(RunnerError, match="bitsandbytes not installed"):
        runner.check_ready()
    fallback = instantiate(_load("internvl35_8b"))  # auto: unquantised, and the fingerprint says so
    assert fallback.fingerprint()["quantization"] == "none"
