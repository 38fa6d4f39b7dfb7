"""Issue 41 (6): the remote-code check reads what the remote code imports, not only the modules `auto_map` names:
a removed cache call in a relatively imported helper, and the tokenizer's and processor's code (which load after
the weights), are refused before any weights load and before any of that code runs. A fake Kimi-VL folder of
Python files only (no weights) shows it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.kimi_vl import KimiVLRunner
from facet_probe.runners.hf.remote_code import remote_code_problems, remote_modules
from facet_probe_dev.testing.tiny_models import tiny_model_path

MODELING = '''
from transformers import PreTrainedModel

from .attention_utils import attend


class FakeKimi(PreTrainedModel):
    pass
'''
HELPER = '''
from . import rope_utils


def attend(self, past_key_value, kv_seq_len):
    if past_key_value is not None:
        kv_seq_len += past_key_value.get_usable_length(kv_seq_len, self.layer_idx)
    return kv_seq_len
'''
PROCESSING = '''
from transformers.processing_utils import ProcessorMixin
from transformers.image_utils import GoneInTransformers5

from .image_processing_fake import FakeImageProcessor
'''
TOKENIZATION = '''
from pathlib import Path

Path({marker!r}).write_text("the tokenizer's remote code ran")

from transformers import PreTrainedTokenizerFast


class FakeTokenizer(PreTrainedTokenizerFast):
    pass
'''


def _fake_kimi(root: Path, tiny_root: Path, helper: str = HELPER, processing: str = PROCESSING) -> Path:
    folder = root / "kimi"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "kimi_vl", "transformers_version": "4.48.2",
        "auto_map": {"AutoConfig": "configuration_fake.FakeConfig", "AutoModelForCausalLM": "modeling_fake.FakeKimi"}}))
    (folder / "configuration_fake.py").write_text("from transformers import PretrainedConfig\n\n\n"
                                                  "class FakeConfig(PretrainedConfig):\n    model_type = 'kimi_vl'\n")
    (folder / "modeling_fake.py").write_text(MODELING)
    (folder / "attention_utils.py").write_text(helper)
    (folder / "rope_utils.py").write_text("import torch\n")
    (folder / "processing_fake.py").write_text(processing)
    (folder / "image_processing_fake.py").write_text("from transformers.image_processing_utils import "
                                                     "BaseImageProcessor as FakeImageProcessor\n")
    (folder / "tokenization_fake.py").write_text(TOKENIZATION.format(marker=str(root / "TOKENIZER_RAN")))
    (folder / "processor_config.json").write_text(json.dumps({"auto_map": {"AutoProcessor":
                                                                           "processing_fake.FakeProcessor"}}))
    tiny = tiny_model_path("llava", tiny_root)  # a real tokenizer, so only the code is in question
    shutil.copy(tiny / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((tiny / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": ["tokenization_fake.FakeTokenizer", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_a_removed_call_in_an_imported_helper_and_the_processors_imports_are_refused_before_anything_loads(
        tmp_path, tiny_root):
    folder = _fake_kimi(tmp_path, tiny_root)
    runner = KimiVLRunner(name="kimi", model_id="moonshotai/Kimi-VL-A3B-Instruct", local_path=str(folder))
    with pytest.raises(RunnerError) as err:
        runner.preflight()
    msg = str(err.value)
    assert "attention_utils.py:7 calls past_key_value.get_usable_length" in msg  # reached through `from .`
    assert "processing_fake.py:3 imports GoneInTransformers5 from transformers.image_utils" in msg
    assert "transformers==4.48.2" in msg and "vllm serve" in msg
    assert not (tmp_path / "TOKENIZER_RAN").exists()  # refused before the tokenizer's code ran
    assert runner.model is None


def test_every_module_the_remote_code_reaches_is_read(tmp_path, tiny_root):
    fitting = HELPER.replace("get_usable_length(kv_seq_len, self.layer_idx)", "get_seq_length(self.layer_idx)")
    folder = _fake_kimi(tmp_path, tiny_root, helper=fitting, processing=PROCESSING.replace(
        "from transformers.image_utils import GoneInTransformers5\n", ""))
    assert [p.name for p in remote_modules(folder)] == [
        "attention_utils.py", "configuration_fake.py", "image_processing_fake.py", "modeling_fake.py",
        "processing_fake.py", "rope_utils.py", "tokenization_fake.py"]
    assert remote_code_problems(folder) == []


def test_a_relatively_imported_module_missing_from_the_folder_is_missing_remote_code(tmp_path, tiny_root):
    folder = _fake_kimi(tmp_path, tiny_root)
    (folder / "rope_utils.py").unlink()
    with pytest.raises(RunnerError, match=r"needs its remote code \(rope_utils.py\)"):
        KimiVLRunner(name="kimi", model_id="m/k", local_path=str(folder)).preflight()
