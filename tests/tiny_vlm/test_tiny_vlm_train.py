"""The trainer: learning-rate schedule, and a whole (tiny) run of every stage that saves a loadable model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from transformers import LlavaForConditionalGeneration, LlavaProcessor

from facet_probe.tiny_vlm import echo
from facet_probe.tiny_vlm.architecture import TinyVLMSpec
from facet_probe.tiny_vlm.train import TrainConfig, lr_at, train

TINY = TinyVLMSpec(vision_hidden=32, vision_layers=1, vision_heads=2, text_hidden=32, text_layers=1,
                   text_heads=2, text_kv_heads=2, text_intermediate=64)


def test_lr_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    cfg = TrainConfig(lr=2e-3, warmup=10, min_lr_ratio=0.1)
    assert lr_at(0, 100, cfg) == pytest.approx(2e-4)
    assert lr_at(9, 100, cfg) == pytest.approx(2e-3)
    assert lr_at(10, 100, cfg) == pytest.approx(2e-3)
    assert lr_at(55, 100, cfg) == pytest.approx(2e-3 * (0.1 + 0.9 * 0.5))  # half-way down the cosine
    assert lr_at(100, 100, cfg) == pytest.approx(2e-4) and lr_at(500, 100, cfg) == pytest.approx(2e-4)
    assert lr_at(55, 100, cfg, peak=1e-3) == pytest.approx(lr_at(55, 100, cfg) / 2)  # a stage's own peak
    values = [lr_at(s, 100, cfg) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_a_tiny_run_of_every_stage_saves_a_model_the_processor_and_the_log(tmp_path):
    cfg = TrainConfig(procs=1, threads=1, align_steps=2, bind_steps=2, pretrain_steps=2, pretrain_batch=4,
                      steps=3, batch_size=4, max_branches=2, n_per_set=6, vocab_size=600, eval_every=0, warmup=2, spec=TINY,
                      final_steps=2, final_weights={"synthetic_mcq": 1.0, echo.NAME: 1.0, "not_a_set": 1.0})
    summary = train(cfg, tmp_path)
    log = json.loads((tmp_path / "training_log.json").read_text())
    assert log["steps"] == 3 and log["bind_steps"] == 2 and log["pretrain_steps"] == 2
    assert log["align_steps"] == 2 and 0.0 <= log["align_caption_accuracy"] <= 1.0
    assert log["bind_weights"] == {echo.NAME: 1.0} and echo.NAME in log["weights"]
    assert log["final_steps"] == 2 and log["final_weights"] == {"synthetic_mcq": 1.0, echo.NAME: 1.0}
    assert log["generator_version"] == summary["generator_version"] and len(log["sets"]) == 9
    assert log["replies_seen"] >= 3 * 4 and log["tokens_seen"] > log["answer_tokens_seen"] > 0
    assert set(log["pretrain_accuracy"]) == {"induction", "lookup", "caption"}
    model = LlavaForConditionalGeneration.from_pretrained(tmp_path, dtype=torch.float32)
    processor = LlavaProcessor.from_pretrained(tmp_path)
    assert model.config.text_config.hidden_size == 32
    assert processor.tokenizer.convert_tokens_to_ids("\nA.") != processor.tokenizer.unk_token_id
    ids = processor.tokenizer.apply_chat_template([{"role": "user", "content": "Which option says kite?"}],
                                                  add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if not torch.is_tensor(ids) else ids
    out = model.generate(input_ids=ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > ids.shape[1] and all(torch.isfinite(p).all() for p in model.parameters())


def _quick(**overrides) -> TrainConfig:
    """A tiny task-stage-only run (no echo, caption or copy stage)."""
    base = dict(procs=1, threads=1, align_steps=0, bind_steps=0, pretrain_steps=0, steps=2, batch_size=4,
                max_branches=2, n_per_set=6, vocab_size=600, eval_every=0, warmup=2, side_batch=0, spec=TINY)
    return TrainConfig(**{**base, **overrides})


def test_a_run_from_init_starts_from_the_saved_weights_and_their_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    train(_quick(), tmp_path / "first")
    log = train(_quick(init=str(tmp_path / "first"), steps=0, vocab_size=500), tmp_path / "resumed")
    assert log["steps"] == 0 and log["replies_seen"] == 0
    first, resumed = (LlavaForConditionalGeneration.from_pretrained(tmp_path / name, dtype=torch.float32)
                      .state_dict() for name in ("first", "resumed"))
    assert first.keys() == resumed.keys() and all(torch.equal(first[k], resumed[k]) for k in first)
    assert (LlavaProcessor.from_pretrained(tmp_path / "resumed").tokenizer.get_vocab()
            == LlavaProcessor.from_pretrained(tmp_path / "first").tokenizer.get_vocab())


def test_the_examples_seen_do_not_depend_on_the_number_of_processes(tmp_path):
    one = train(_quick(), tmp_path / "one")
    two = train(replace(_quick(), procs=2), tmp_path / "two")
    for key in ("steps", "replies_seen", "tokens_seen", "answer_tokens_seen"):
        assert one[key] == two[key] > 0, key
