"""Issue 41 (5): a local checkpoint is named by everything that shapes what the model sees, not only its model
files: editing chat_template.json (or the special / added tokens, a sub-tokenizer) gives the trials other keys,
so a re-run calls them again instead of reusing answers made under the old template. A folder with none of the
newly digested files keeps the key it had, so run folders keyed before resume as they did."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from facet_probe import api
from facet_probe.runners.hf.checkpoint import weights_digest
from facet_probe_dev.testing.tiny_models import tiny_model_path

TINY_VLM = Path(__file__).resolve().parents[3] / "facet_probe" / "assets" / "tiny_vlm"
#: what named a folder before issue 41 (the patterns of that rule, written out here)
EARLIER_RULE = ("*.safetensors", "*.bin", "*config.json", "tokenizer*", "*.jinja", "*.model", "*.tiktoken", "vocab*",
                "merges.txt", "*.py")


def _earlier_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted({p for pattern in EARLIER_RULE for p in folder.glob(pattern) if p.is_file()}):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def _older_layout(src: Path, dest: Path) -> Path:
    """The template in chat_template.json (as llava-hf/llava-1.5-7b-hf publishes it), not chat_template.jinja."""
    folder = shutil.copytree(src, dest)
    template = (folder / "chat_template.jinja").read_text()
    (folder / "chat_template.jinja").unlink()
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    return folder


def test_every_file_that_shapes_the_input_changes_the_name(tiny_root, tmp_path):
    folder = _older_layout(tiny_model_path("llava", tiny_root), tmp_path / "llava")
    names = [weights_digest(folder)]
    template = json.loads((folder / "chat_template.json").read_text())["chat_template"]
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template.replace("ASSISTANT:", "ASSISTANT: ")}))
    names.append(weights_digest(folder))
    (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": "<unk>"}))
    names.append(weights_digest(folder))
    (folder / "added_tokens.json").write_text(json.dumps({"<extra>": 99}))
    names.append(weights_digest(folder))
    (folder / "qformer_tokenizer").mkdir()
    (folder / "qformer_tokenizer" / "vocab.txt").write_text("[PAD]\n[CLS]\n")
    names.append(weights_digest(folder))
    assert len(set(names)) == len(names)
    from facet_probe.runners.hf.checkpoint import digested_files

    assert {"chat_template.json", "special_tokens_map.json", "added_tokens.json", "qformer_tokenizer/vocab.txt",
            "preprocessor_config.json" if (folder / "preprocessor_config.json").exists() else "processor_config.json",
            "generation_config.json", "tokenizer_config.json", "tokenizer.json"} <= set(digested_files(folder))
    (folder / "README.md").write_text("# notes\n")  # not read by the model: the same name
    assert weights_digest(folder) == names[-1]


def test_a_folder_without_the_newly_digested_files_keeps_its_earlier_name(tiny_root):
    for folder in (TINY_VLM, tiny_model_path("llava", tiny_root), tiny_model_path("qwen3_5", tiny_root)):
        assert weights_digest(folder) == _earlier_digest(folder), folder


def _audit(run: Path, folder: Path) -> dict:
    api.audit([f"hydra.run.dir={run}", "model=tiny_vlm", f"model.local_path={folder}", "facet=option_order",
               "dataset=synthetic_mcq", "limit=1", "k=2", "progress=false", "bootstrap=10"])
    return json.loads((run / "run_status.json").read_text())["models"]["tiny_vlm"]


@pytest.mark.slow
def test_editing_chat_template_json_calls_the_trials_again_and_an_unchanged_folder_resumes(tmp_path):
    folder = _older_layout(TINY_VLM, tmp_path / "tiny_vlm")
    run = tmp_path / "run"
    first = _audit(run, folder)
    assert first["called"] == first["planned"] > 0
    again = _audit(run, folder)  # nothing changed: every trial already there
    assert (again["already_done"], again["called"]) == (again["planned"], 0)
    template = json.loads((folder / "chat_template.json").read_text())["chat_template"]
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template.replace("<|user|>", "<|user|> ")}))
    edited = _audit(run, folder)
    assert (edited["already_done"], edited["reused"], edited["called"]) == (0, 0, edited["planned"])
    assert edited["fingerprint"]["weights"] != first["fingerprint"]["weights"]
