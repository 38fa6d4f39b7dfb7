"""`model=hf model.model_id=<hub id or folder>`: the checkpoint runs under the family adapter its config.json names
(issue 63), at the revision pinned in `model.revision` (issue 66); what cannot run is one line saying what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hydra.utils import instantiate
from omegaconf import OmegaConf

import facet_probe
from facet_probe.core.errors import ConfigError
from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.families import checkpoint_folder, family_target
from facet_probe.runners.hf.llava import LlavaRunner

CONF = Path(facet_probe.__file__).parent / "conf" / "model"
#: a checkpoint's model_type -> the panel config of its family (whose adapter must run it)
PANEL_CONFIG = {"qwen3_5": "qwen35_9b", "qwen2_5_vl": "qwen35_9b", "internvl": "internvl35_8b",
                "gemma3": "medgemma_4b", "llava": "llava15_7b", "idefics": "idefics_9b_instruct",
                "instructblip": "instructblip_vicuna_7b", "blip-2": "instructblip_vicuna_7b", "kimi_vl": "kimi_vl_a3b"}
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def checkpoint(folder: Path, model_type: str) -> Path:
    """A folder whose config.json names `model_type` (all that picking the family reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, "architectures": ["SomeModel"]}))
    return folder


def hf_config(**settings):
    """conf/model/hf.yaml with `settings`, as Hydra composes it."""
    node = OmegaConf.load(CONF / "hf.yaml")
    for key, value in settings.items():
        node[key] = value
    return node


@pytest.fixture
def hub_cache(monkeypatch, tmp_path):
    """An offline Hugging Face cache holding `tiny/byo`: main at COMMIT_A (a LLaVA), COMMIT_B a Gemma3."""
    import huggingface_hub.constants as hub

    repo = tmp_path / "hub" / "models--tiny--byo"
    checkpoint(repo / "snapshots" / COMMIT_A, "llava")
    checkpoint(repo / "snapshots" / COMMIT_B, "gemma3")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT_A)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return repo


@pytest.mark.parametrize(("model_type", "panel"), sorted(PANEL_CONFIG.items()))
def test_a_checkpoint_runs_under_the_adapter_of_its_family_s_panel_config(tmp_path, model_type, panel):
    folder = checkpoint(tmp_path / "ckpt", model_type)
    assert family_target(str(folder), None, str(folder)) == yaml.safe_load((CONF / f"{panel}.yaml").read_text())["_target_"]


def test_a_folder_given_as_model_id_is_loaded_from_there_by_its_family(tiny_root):
    from facet_probe_dev.testing.tiny_models import tiny_model_path

    folder = tiny_model_path("llava", tiny_root)
    runner = instantiate(hf_config(model_id=str(folder)), _convert_="all")
    assert type(runner) is LlavaRunner and runner.local_path == str(folder) and runner.revision is None
    assert runner.fingerprint()["runner"] == "hf/llava"


def test_a_hub_id_is_read_from_the_cache_at_the_pinned_revision(hub_cache):
    main = instantiate(hf_config(model_id="tiny/byo"), _convert_="all")
    assert type(main).__name__ == "LlavaRunner" and main.local_path is None
    pinned = instantiate(hf_config(model_id="tiny/byo", revision=COMMIT_B), _convert_="all")
    assert type(pinned).__name__ == "Gemma3Runner" and pinned.revision == COMMIT_B
    assert pinned._resolve_folder() == (hub_cache / "snapshots" / COMMIT_B, COMMIT_B)  # the weights' snapshot too
    assert pinned.fingerprint()["revision"] == COMMIT_B and pinned.weights_id() == COMMIT_B


def test_a_hub_id_absent_offline_says_how_to_download_it_at_its_revision(hub_cache):
    with pytest.raises(RunnerError, match=r"tiny/absent@v2 is not in the local .*hf download tiny/absent --revision v2"):
        family_target("tiny/absent", "v2", None)


def test_a_checkpoint_of_no_known_family_is_one_line_naming_the_model_types_that_run(tmp_path):
    folder = checkpoint(tmp_path / "mamba", "mamba")
    with pytest.raises(ConfigError) as err:
        family_target(str(folder), None, str(folder))
    message = str(err.value)
    assert "\n" not in message and "a 'mamba' checkpoint (architectures: SomeModel)" in message
    assert all(f" {model_type}" in message for model_type in PANEL_CONFIG)


def test_a_model_id_that_is_neither_a_folder_nor_a_hub_id_says_so(tmp_path):
    with pytest.raises(ConfigError, match="no such folder, and not a Hugging Face hub id"):
        checkpoint_folder(str(tmp_path / "absent"))
    assert checkpoint_folder("owner/model") is None and checkpoint_folder(str(tmp_path)) == str(tmp_path)


def test_a_folder_without_a_tokenizer_names_the_pinned_revision_to_download(tmp_path):
    runner = LlavaRunner(name="m", model_id="owner/model", revision="v2", local_path=str(tmp_path))
    with pytest.raises(RunnerError, match="hf download owner/model --revision v2"):
        runner._check_tokenizer(tmp_path)


def test_a_qwen_checkpoint_without_settings_has_the_panel_s_thinking_off():
    from facet_probe.runners.hf.qwen import QwenRunner

    assert QwenRunner(name="q", model_id="owner/model").chat_template_options() == {"enable_thinking": False}
