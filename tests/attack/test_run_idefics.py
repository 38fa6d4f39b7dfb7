"""The attacks on the IDEFICS family (the OpenFlamingo-9B stand-in): batched equals serial, and the answer,
rationale and stop-reasoning attacks through `python -m facet_probe.attack model=idefics_9b_instruct`."""

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
from facet_probe.runners.hf.idefics import IdeficsRunner
from facet_probe_dev.testing.trained_tiny import train_tiny_llava

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def answering_idefics(tiny_root):
    """The tiny IDEFICS with its LM head fitted to answer the first 2 synthetic_visual_mcq items."""
    return train_tiny_llava(tiny_root, n=2, family="idefics", runner_cls=IdeficsRunner)


@pytest.fixture(scope="module")
def idefics(answering_idefics):
    runner = IdeficsRunner(name="tiny", model_id="tiny/idefics", local_path=str(answering_idefics),
                           dtype="float32", generation={"max_new_tokens": 16})
    runner.check_ready()
    return runner


def test_batched_forward_gradients_and_generation_equal_single_calls(idefics):
    batch = samples(3)
    replies = [f"It is {'very ' * i}red. The answer is ({b.gold})." for i, b in enumerate(batch)]
    forced = [forced_reply(idefics, b, r) for b, r in zip(batch, replies, strict=True)]
    xs = [[x.clone().requires_grad_(True) for x in f.encoded.images01] for f in forced]
    ops = ModelOps(idefics, batch_size=3)
    assert ops.batched
    together = ops.forward([f.encoded for f in forced], [idefics.pixel_inputs(x) for x in xs],
                           [f.positions for f in forced])
    sum(lg[f.answer_row, f.answer_ids[b.gold]] for lg, f, b in zip(together, forced, batch, strict=True)).backward()
    assert all(float(x[0].grad.abs().sum()) > 0 for x in xs)  # every sample's pixels get a gradient
    with torch.no_grad():
        alone = [idefics.forward_logits(f.encoded, idefics.pixel_inputs(f.encoded.images01), f.positions)
                 for f in forced]
    for a, b in zip(together, alone, strict=True):
        torch.testing.assert_close(a.detach(), b, atol=1e-4, rtol=1e-4)
    prompts = [idefics.encode(b.prompt) for b in batch]
    pix = [idefics.pixel_inputs(e.images01) for e in prompts]
    assert ops.generate(prompts, pix, 12) == [idefics.generate_text(e, p, 12) for e, p in zip(prompts, pix, strict=True)]


@pytest.mark.slow
def test_the_three_attacks_run_on_idefics_through_the_attack_app(tmp_path, answering_idefics):
    cmd = [sys.executable, "-m", "facet_probe.attack", "-m", "attack=answer,rationale,stop_reasoning",
           "model=idefics_9b_instruct", f"model.local_path={answering_idefics}", "prompt.cot=true",
           f"out_root={tmp_path}", "limit=1", "attack.steps=2", "attack.update_every=2", "max_new_tokens=16"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    group = tmp_path / "attack" / "idefics_9b_instruct" / "synthetic_visual_mcq" / "eps16-a1-s2-u2"
    for attack in ("answer", "rationale", "stop_reasoning"):
        (row,) = [json.loads(ln) for ln in (group / f"{attack}-cot" / "results.jsonl").read_text().splitlines()]
        assert row["clean_correct"] and row["attacked"] and row["steps_run"] == 2, attack
        assert 0 < row["linf_255"] <= 16 + 1e-6 and len(row["curve"]["loss"]) == 2, attack
    assert "| idefics_9b_instruct / synthetic_visual_mcq |" in (group / "table.md").read_text()
