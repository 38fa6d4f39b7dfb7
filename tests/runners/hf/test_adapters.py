"""Issue 31 (3): `model.adapter` loads a PEFT (LoRA) adapter on any HF config, named in the fingerprint.

A tiny LLaVA and LoRA adapters built offline with peft (non-zero B, so they change the outputs).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.checkpoint import weights_digest
from facet_probe.runners.hf.llava import LlavaRunner
from facet_probe_dev.testing.in_process import Ran, run_module
from facet_probe_dev.testing.tiny_models import tiny_model_path

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

ROOT = Path(__file__).resolve().parents[3]
PROMPT = prompt_of("Which colour?", image_ref(40, 36, 3), "A or B?")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def build_lora(base: Path, out: Path, seed: int) -> Path:
    """A LoRA adapter on the language model's q/v projections, its B matrices random (not peft's zeros)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def llava_path(tiny_root) -> Path:
    return tiny_model_path("llava", tiny_root)


@pytest.fixture(scope="module")
def loras(llava_path, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("loras")
    return build_lora(llava_path, root / "lora_a", 1), build_lora(llava_path, root / "lora_b", 2)


def _runner(path: Path, **kw) -> LlavaRunner:
    return LlavaRunner(name="tiny_llava", model_id="tiny/llava", local_path=str(path), dtype="float32",
                       generation={"max_new_tokens": 6}, **kw)


def _logits(runner: LlavaRunner) -> torch.Tensor:
    enc = runner.encode(PROMPT, "The answer is (A).")
    with torch.no_grad():
        pixels = runner.pixel_inputs(enc.images01)
        return runner.forward_logits(enc, pixels, list(range(enc.prompt_len - 1, len(enc) - 1)))


def test_an_adapter_changes_the_fingerprint_the_provenance_and_the_outputs(llava_path, loras):
    base, with_a, with_b = _runner(llava_path), _runner(llava_path, adapter=str(loras[0])), _runner(
        llava_path, adapter=str(loras[1]))
    for r in (base, with_a, with_b):
        r.check_ready()
    prints = [base.fingerprint(), with_a.fingerprint(), with_b.fingerprint()]
    assert "adapter" not in prints[0]  # the base model's fingerprint is the one it always had
    assert prints[1]["adapter"] != prints[2]["adapter"] and prints[1]["weights"] == prints[0]["weights"]
    assert prints[1] != prints[0] != prints[2]
    record = with_a.provenance["adapter"]
    assert record["source"] == str(loras[0]) and record["digest"] == prints[1]["adapter"]
    assert type(with_a.model) is type(base.model)  # still the transformers model: every other part unchanged
    logits = [_logits(r) for r in (base, with_a, with_b)]
    assert (logits[1] - logits[0]).abs().max() > 1e-3 and (logits[2] - logits[1]).abs().max() > 1e-3
    enc = with_a.encode(PROMPT, "The answer is (A).")  # pixel gradients still flow through the adapted model
    x = [t.clone().requires_grad_(True) for t in enc.images01]
    with_a.forward_logits(enc, with_a.pixel_inputs(x), [len(enc) - 2])[0, 0].backward()
    assert float(x[0].grad.abs().sum()) > 0


def test_an_adapter_from_the_hub_cache_is_found_offline_and_named_by_its_digest(llava_path, loras, tmp_path,
                                                                                monkeypatch):
    import huggingface_hub.constants as hub

    repo = tmp_path / "models--someone--tiny-lora"
    shutil.copytree(loras[0], repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path))
    runner = _runner(llava_path, adapter="someone/tiny-lora")
    runner.check_ready()
    assert runner.provenance["adapter"]["commit"] == COMMIT
    assert runner.fingerprint()["adapter"] == weights_digest(loras[0])  # the same files as the local folder
    missing = _runner(llava_path, adapter="someone/not-cached")
    with pytest.raises(RunnerError, match=r"someone/not-cached@main is not in the local Hugging Face cache.*"
                                          r"model\.adapter"):
        missing.preflight()


def test_an_adapter_pointing_nowhere_or_at_a_model_folder_is_one_clear_error(llava_path, tmp_path):
    with pytest.raises(RunnerError, match=r"model\.adapter=.*nowhere: no such folder"):
        _runner(llava_path, adapter=str(tmp_path / "nowhere")).preflight()
    with pytest.raises(RunnerError, match="has no adapter_config.json"):
        _runner(llava_path, adapter=str(llava_path)).check_ready()


def test_without_peft_an_adapter_says_how_to_install_it(llava_path, loras, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # what `import peft` sees when it is not installed
    runner = _runner(llava_path, adapter=str(loras[0]))
    for step in (runner.preflight, runner.check_ready):
        with pytest.raises(RunnerError, match=r"peft package is not installed: pip install 'facet_probe\[adapters\]'"):
            step()
    _runner(llava_path).check_ready()  # no adapter: peft is not needed


def _audit(run: Path, *overrides: str) -> Ran:
    """A small audit of the tiny VLM into `run`, in this process."""
    return run_module("facet_probe", f"hydra.run.dir={run}", "progress=false", "facet=option_order",
                   "dataset=synthetic_mcq", "limit=2", "k=2", *overrides, cwd=ROOT)


def _status(run: Path) -> dict:
    return json.loads((run / "run_status.json").read_text())["models"]["tiny_vlm"]


def _keys(run: Path) -> set[str]:
    return {json.loads(line)["trial_key"] for line in (run / "trials.jsonl").read_text().splitlines() if line}


def test_runs_with_an_adapter_never_reuse_the_base_models_or_another_adapters_trials(llava_path, loras, tmp_path):
    """The base model's folder refuses an adapter run; through a shared call cache, only the same adapter's
    identical calls are served."""
    cache = f"store.cache_dir={tmp_path / 'cache'}"
    base, lora_a, lora_b = f"model.local_path={llava_path}", f"model.adapter={loras[0]}", f"model.adapter={loras[1]}"
    assert _audit(tmp_path / "base", base, cache).returncode == 0
    refused = _audit(tmp_path / "base", base, cache, lora_a)
    assert refused.returncode == 2 and "model.adapter: None ->" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _audit(tmp_path / "a", base, cache, lora_a).returncode == 0
    assert _status(tmp_path / "a")["called"] == 4 and _status(tmp_path / "a")["reused"] == 0
    assert not _keys(tmp_path / "a") & _keys(tmp_path / "base")
    assert _audit(tmp_path / "a_again", base, cache, lora_a).returncode == 0  # the same adapter: served
    assert _status(tmp_path / "a_again")["called"] == 0 and _status(tmp_path / "a_again")["reused"] == 4
    assert _audit(tmp_path / "b", base, cache, lora_b).returncode == 0  # another adapter: called anew
    assert _status(tmp_path / "b")["called"] == 4 and not _keys(tmp_path / "b") & _keys(tmp_path / "a")


def test_the_audit_app_refuses_an_adapter_that_is_not_there(llava_path, tmp_path):
    proc = _audit(tmp_path / "run", f"model.local_path={llava_path}", f"model.adapter={tmp_path}/missing_lora")
    assert proc.returncode != 0
    assert "missing_lora: no such folder" in proc.stderr and "Traceback" not in proc.stderr


def test_vllm_does_not_serve_an_adapter_and_says_so(llava_path, loras):
    from facet_probe.runners.vllm_engine import unservable_reason

    archs = ["LlavaForConditionalGeneration"]
    assert unservable_reason(_runner(llava_path), archs, archs) is None
    assert "PEFT adapters are applied by the HF runner only" in unservable_reason(
        _runner(llava_path, adapter=str(loras[0])), archs, archs)


def test_the_attacks_weights_id_names_the_adapter_too(llava_path, loras):
    base = _runner(llava_path).weights_id()
    assert _runner(llava_path, adapter=str(loras[0])).weights_id() == f"{base}+adapter:{weights_digest(loras[0])}"


def test_an_attack_with_an_adapter_never_resumes_the_base_models_results(llava_path, loras, tmp_path):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from facet_probe.attack.config import register
    from facet_probe.attack.run import run_attack
    from facet_probe.core.errors import ConfigError

    def config(*overrides: str):
        register()
        GlobalHydra.instance().clear()
        with initialize_config_module("facet_probe.conf", version_base="1.3"):
            cfg = compose("attack_app", overrides=[f"model.local_path={llava_path}", f"out_root={tmp_path}",
                                                   "attack=none", "limit=2", "max_new_tokens=8", *overrides])
        GlobalHydra.instance().clear()
        return cfg

    def replies(run_dir: Path) -> list[str]:
        return [json.loads(line)["clean_output"] for line in (run_dir / "results.jsonl").read_text().splitlines()]

    base = config()
    run_attack(base, tmp_path / "base")
    with pytest.raises(ConfigError, match="weights"):
        run_attack(config(f"model.adapter={loras[0]}"), tmp_path / "base")
    run_attack(config(f"model.adapter={loras[0]}"), tmp_path / "adapted")
    assert replies(tmp_path / "adapted") != replies(tmp_path / "base")
