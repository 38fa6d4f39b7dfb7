"""The BLIP-2 family (MiniGPT-4's layout, InstructBLIP) under attack: the app end to end, batched equals serial."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import samples

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.objectives.base import forced_reply
from facet_probe.runners.hf.blip2 import Blip2Runner, MiniGPT4Runner
from facet_probe_dev.testing.trained_tiny import train_tiny_llava

ROOT = Path(__file__).resolve().parents[2]
# our config -> (tiny family, the adapter the config names)
VICTIMS = {"minigpt4_vicuna_7b": ("blip2", MiniGPT4Runner), "instructblip_vicuna_7b": ("instructblip", Blip2Runner)}


@pytest.fixture(scope="session")
def answering_blip2(tiny_root):
    """config -> a tiny copy (its LM head fitted) that answers the first 2 synthetic_visual_mcq items correctly."""
    return {name: train_tiny_llava(tiny_root, n=2, family=fam, runner_cls=cls) for name, (fam, cls) in VICTIMS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(VICTIMS))
def test_the_three_attacks_run_end_to_end_through_the_app(tmp_path, answering_blip2, config):
    cmd = [sys.executable, "-m", "facet_probe.attack", "-m", "attack=answer,rationale,stop_reasoning", "prompt.cot=true",
           f"model={config}", f"model.local_path={answering_blip2[config]}", "model.dtype=float32",
           f"out_root={tmp_path}", "limit=2", "attack.steps=2", "attack.update_every=2", "max_new_tokens=16"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    group = tmp_path / "attack" / config / "synthetic_visual_mcq" / "eps16-a1-s2-u2"
    for attack in ("answer", "rationale", "stop_reasoning"):
        rows = [json.loads(ln) for ln in (group / f"{attack}-cot" / "results.jsonl").read_text().splitlines()]
        assert len(rows) == 2 and all(r["clean_correct"] for r in rows)  # the fitted copy answers: both attacked
        for r in rows:
            assert r["attacked"] and r["steps_run"] == 2 and 0 < r["linf_255"] <= 16 + 1e-6, r
            assert r.get("error") is None and r["model"] == config


@pytest.mark.parametrize("config", sorted(VICTIMS))
def test_batched_logits_replies_and_gradients_equal_one_at_a_time(answering_blip2, config):
    runner = VICTIMS[config][1](name=config, model_id="tiny/x", local_path=str(answering_blip2[config]),
                                dtype="float32")
    batch = samples(2)
    replies = [f"It is {'very ' * i}red. The answer is ({b.gold})." for i, b in enumerate(batch)]
    forced = [forced_reply(runner, b, r) for b, r in zip(batch, replies, strict=True)]
    xs = [[x.clone().requires_grad_(True) for x in f.encoded.images01] for f in forced]
    pixels = [runner.pixel_inputs(x) for x in xs]
    ops = ModelOps(runner, batch_size=2)
    together = ops.forward([f.encoded for f in forced], pixels, [f.positions for f in forced])
    with torch.no_grad():
        alone = [runner.forward_logits(f.encoded, p, f.positions) for f, p in zip(forced, pixels, strict=True)]
    for a, b in zip(together, alone, strict=True):
        torch.testing.assert_close(a.detach(), b, atol=1e-4, rtol=1e-4)
    sum(lg[f.answer_row, f.answer_ids[b.gold]] for lg, f, b in zip(together, forced, batch, strict=True)).backward()
    assert all(float(x[0].grad.abs().sum()) > 0 for x in xs)  # the pixel gradient reaches every sample's image
    prompts = [runner.encode(b.prompt) for b in batch]
    pix = [runner.pixel_inputs(e.images01) for e in prompts]
    assert ops.generate(prompts, pix, 8) == [runner.generate_text(e, p, 8) for e, p in zip(prompts, pix, strict=True)]
    assert ops.generate_calls == 1 and ops.forward_calls == 1
