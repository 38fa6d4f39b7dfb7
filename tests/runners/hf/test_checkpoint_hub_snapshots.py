"""Issue 28 (1-6): real hub snapshots load as published, checked on tiny offline copies saved in each layout.

Chat templates in every layout (1), the attention actually used in the fingerprint (2; the resume test is in
test_resume_attention.py), prompts counted against the context (3), remote code read before any
weights load (4), the true cause when a checkpoint or tokenizer is missing (5), and what each image became
plus the resolved commit in every trial's provenance (6).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.base import Request, RunnerError, generate_all
from facet_probe.runners.hf.gemma3 import Gemma3Runner
from facet_probe.runners.hf.internvl import InternVLRunner
from facet_probe.runners.hf.kimi_vl import KimiVLRunner
from facet_probe.runners.hf.llava import LLAVA15_TEMPLATE, LlavaRunner
from facet_probe_dev.testing.tiny_models import LLAVA_HF_TEMPLATE, tiny_model_path

ROOT = Path(__file__).resolve().parents[3]
A, B = image_ref(48, 40, 1), image_ref(40, 48, 2)


def _copy(tiny_root: Path, family: str, dest: Path) -> Path:
    return shutil.copytree(tiny_model_path(family, tiny_root), dest)


def _older_layout(folder: Path, template: str | None) -> Path:
    """The template moved into the processor's chat_template.json (the older hub layout), or removed."""
    (folder / "chat_template.jinja").unlink()
    for name in ("tokenizer_config.json", "processor_config.json"):
        data = json.loads((folder / name).read_text())
        data.pop("chat_template", None)
        (folder / name).write_text(json.dumps(data))
    if template is not None:
        (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    return folder


def _runner(cls, folder: Path, **kw):
    return cls(name="snap", model_id="tiny/snap", local_path=str(folder), dtype="float32",
               generation={"max_new_tokens": 4}, **kw)


# ---------------------------------------------------------------- 1: chat templates in every layout

def test_a_template_only_in_chat_template_json_is_read_medgemma(tiny_root, tmp_path):
    from facet_probe_dev.testing.tiny_models import GEMMA3_TEMPLATE

    folder = _older_layout(_copy(tiny_root, "gemma3", tmp_path / "gemma3"), GEMMA3_TEMPLATE)
    runner = _runner(Gemma3Runner, folder)
    runner.check_ready()
    assert runner.provenance["chat_template"] == "checkpoint (chat_template.json)"
    assert runner.render(prompt_of("x", A, "y")).count("<start_of_image>") == 1


def test_llava_hf_template_in_chat_template_json_is_read_and_replaced_by_llavas_own(tiny_root, tmp_path):
    folder = _older_layout(_copy(tiny_root, "llava", tmp_path / "llava"), LLAVA_HF_TEMPLATE)
    runner = _runner(LlavaRunner, folder)
    runner.check_ready()  # before: "the checkpoint has no chat template"
    assert runner.provenance["chat_template"].startswith("facet_probe llava (checkpoint template reorders")
    assert runner._template == LLAVA15_TEMPLATE


def test_llava_without_any_template_falls_back_to_llavas_own_format(tiny_root, tmp_path):
    folder = _older_layout(_copy(tiny_root, "llava", tmp_path / "llava"), None)
    runner = _runner(LlavaRunner, folder)
    runner.check_ready()
    assert runner.provenance["chat_template"] == "facet_probe llava (checkpoint has no chat template)"
    text = runner.render(prompt_of("first", A, "second", B, "third"))
    assert text.index("first") < text.index("<image>") < text.index("second") < text.rindex("<image>")


def test_medgemma_without_any_template_names_the_files_looked_at(tiny_root, tmp_path):
    folder = _older_layout(_copy(tiny_root, "gemma3", tmp_path / "gemma3"), None)
    with pytest.raises(RunnerError, match=r"no chat template \(looked in the tokenizer and chat_template.jinja, "
                                          r"chat_template.json"):
        _runner(Gemma3Runner, folder).check_ready()


# ---------------------------------------------------------------- 2: the attention actually used

def test_the_fingerprint_keys_the_attention_used_and_names_the_configured_one_as_legacy(make_runner):
    runner = make_runner("llava", attn_implementation="auto")
    assert runner.fingerprint()["attn_implementation"] == "sdpa" == runner.model.config._attn_implementation
    [legacy] = runner.legacy_fingerprints()
    assert legacy["fingerprint"] == {**runner.fingerprint(), "attn_implementation": "auto"}
    assert legacy["provenance"] == {"attn_implementation": "sdpa"}
    assert make_runner("llava", attn_implementation="sdpa").legacy_fingerprints() == []


# ---------------------------------------------------------------- 3: context length

@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_a_trial_that_cannot_fit_the_context_is_labelled_and_the_rest_run(make_runner):
    runner = make_runner("llava", generation={"max_new_tokens": 900})  # the tiny model has 1,024 positions
    short = prompt_of("Which?", A, "A cat B dog")
    long = prompt_of(" ".join(["evidence"] * 200), A, "A cat B dog")
    reqs = [Request(key=f"s{i}", prompt=short, metadata={"cell": "c"}) for i in range(3)]
    reqs.append(Request(key="long", prompt=long, metadata={"cell": "c"}))
    out = generate_all(runner, reqs)
    assert out["long"].error.startswith("context_overflow: the prompt is ")
    assert "> the model's 1024 positions" in out["long"].error and out["long"].text == ""
    assert out["long"].provenance["image_tokens"] == [16]
    assert all(out[f"s{i}"].error is None for i in range(3))


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_context_check_off_generates_past_the_context_as_the_reference_did(make_runner):
    runner = make_runner("llava", generation={"max_new_tokens": 900}, context_check="off")
    long = prompt_of(" ".join(["evidence"] * 200), A, "A cat B dog")
    out = generate_all(runner, [Request(key="long", prompt=long)])["long"]
    assert out.error is None and out.provenance["image_tokens"] == [16]


def test_a_cell_that_mostly_cannot_fit_stops_before_any_call_naming_what_to_change(tiny_root):
    runner = _runner(InternVLRunner, tiny_model_path("internvl", tiny_root), max_tiles=4)
    runner.generation["max_new_tokens"] = 1000
    runner.check_ready()
    reqs = [Request(key=f"k{i}", prompt=prompt_of("Which?", A, B, "A or B"), metadata={"cell": "option_order/x"})
            for i in range(4)]
    with pytest.raises(RunnerError, match=r"4 of 4 sampled prompts of cell option_order/x cannot fit the model's "
                                          r"1024 positions.*Nothing was called.*model.max_tiles \(now 4 tiles"):
        next(iter(runner.generate(reqs)))


# ---------------------------------------------------------------- 4: remote code read before any weights

KIMI_CONFIG = {"model_type": "kimi_vl", "transformers_version": "4.48.2",
               "auto_map": {"AutoConfig": "configuration_kimi_vl.KimiVLConfig",
                            "AutoModelForCausalLM": "modeling_kimi_vl.KimiVLForConditionalGeneration"}}
OLD_ATTENTION = '''
from transformers.cache_utils import Cache, DynamicCache


def attend(self, past_key_value, kv_seq_len, cache_position):
    position = cache_position.unsqueeze(0)
    if past_key_value is not None:
        kv_seq_len += past_key_value.get_usable_length(kv_seq_len, self.layer_idx)
    return kv_seq_len, position
'''


def _kimi_folder(tmp_path: Path, tiny_root: Path, modeling: str) -> Path:
    folder = tmp_path / "kimi"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(KIMI_CONFIG))
    (folder / "configuration_kimi_vl.py").write_text(
        "from transformers import PretrainedConfig\n\n\nclass KimiVLConfig(PretrainedConfig):\n"
        "    model_type = 'kimi_vl'\n")
    (folder / "modeling_kimi_vl.py").write_text(modeling)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # a real tokenizer, so only the code is in question
        shutil.copy(tiny_model_path("llava", tiny_root) / name, folder / name)
    return folder


def test_kimi_remote_code_that_calls_a_removed_cache_method_fails_before_loading_naming_the_version(
        tmp_path, tiny_root):
    folder = _kimi_folder(tmp_path, tiny_root, OLD_ATTENTION)  # no weights: the check must come first
    runner = KimiVLRunner(name="kimi", model_id="moonshotai/Kimi-VL-A3B-Instruct", local_path=str(folder))
    with pytest.raises(RunnerError) as err:
        runner.preflight()
    msg = str(err.value)
    assert "modeling_kimi_vl.py:8 calls past_key_value.get_usable_length" in msg
    assert "transformers==4.48.2" in msg and "separate venv" in msg and "vllm serve" in msg
    assert "cache_position" not in msg  # a tensor, not a cache


def test_kimi_remote_code_that_fits_this_transformers_is_let_through(tmp_path, tiny_root):
    fitting = OLD_ATTENTION.replace("past_key_value.get_usable_length(kv_seq_len, self.layer_idx)",
                                    "past_key_value.get_seq_length(self.layer_idx)")
    from facet_probe.runners.hf.remote_code import remote_code_problems

    folder = _kimi_folder(tmp_path, tiny_root, fitting)
    assert remote_code_problems(folder) == []
    KimiVLRunner(name="kimi", model_id="m/k", local_path=str(folder), device="cpu").preflight()


# ---------------------------------------------------------------- 5: the true cause, before the weights

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOAD = ("from facet_probe.runners.hf.llava import LlavaRunner\n"
        "from facet_probe.runners.base import RunnerError\n"
        "try:\n    LlavaRunner(name='m', model_id='nobody/absent-model').preflight()\n"
        "except RunnerError as exc:\n    print(exc)\n")


@pytest.mark.slow
@pytest.mark.parametrize("offline", [False, True])
def test_a_checkpoint_absent_from_the_cache_blames_hf_hub_offline_only_when_it_is_set(tmp_path, offline):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}", OMP_NUM_THREADS="1")
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    # a real process: huggingface_hub reads HF_HOME, HF_ENDPOINT and HF_HUB_OFFLINE once, at import
    out = subprocess.run([sys.executable, "-c", LOAD], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120).stdout
    assert "nobody/absent-model@main is not in the local Hugging Face cache" in out
    assert ("HF_HUB_OFFLINE is set" in out) == offline
    assert offline or "could not be reached" in out


def test_a_missing_tokenizer_is_reported_before_the_weights_load(tiny_root, tmp_path):
    folder = _copy(tiny_root, "llava", tmp_path / "notok")
    (folder / "tokenizer.json").unlink()
    (folder / "model.safetensors").write_bytes(b"not weights")  # loading them would fail first
    runner = _runner(LlavaRunner, folder)
    for step in (runner.preflight, runner.check_ready):
        with pytest.raises(RunnerError, match="has no tokenizer files") as err:
            step()
        assert "sentencepiece" not in str(err.value) and runner.model is None


# ---------------------------------------------------------------- 6: what the model saw, and the commit

def test_every_trial_records_each_images_tokens_and_pixels(make_runner):
    out = generate_all(make_runner("llava"), [Request(key="a", prompt=prompt_of("x", A, "y", B, "z"))])["a"]
    assert out.provenance["image_tokens"] == [16, 16]  # 32 px / patch 8, class token dropped
    assert out.provenance["image_pixels"] == [[3, 32, 32], [3, 32, 32]]
    tiles = make_runner("internvl", max_tiles=4)
    prov = generate_all(tiles, [Request(key="t", prompt=prompt_of("x", image_ref(64, 32, 3), "y"))])["t"].provenance
    n_tiles = prov["image_pixels"][0][0]
    assert len(prov["image_pixels"][0]) == 4 and prov["image_tokens"] == [4 * n_tiles]


def test_a_hub_snapshot_folder_records_its_commit(tiny_root, tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = _copy(tiny_root, "llava", tmp_path / "models--tiny--llava" / "snapshots" / commit)
    runner = _runner(LlavaRunner, folder)
    runner.check_ready()
    assert runner.provenance["commit"] == commit
    assert runner.fingerprint()["weights"] == runner.weights  # still named by digest: stored trials stay valid
