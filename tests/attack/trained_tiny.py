"""A tiny LLaVA that answers a few synthetic visual questions correctly, trained offline in seconds.

Attacks only run on samples the model answers correctly (with a rationale under CoT), which a random
tiny model never does. This fine-tunes the tiny random LLaVA of `facet_probe.testing.tiny_models` on
the first `n` items of `synthetic_visual_mcq` in both prompt modes (CoT reply ``It is <gold>. The answer
is (X).``, direct reply ``Answer: X``) until its greedy replies are exactly those, and saves it like a
hub checkpoint (loadable with `model=tiny_vlm model.local_path=<folder>`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ
from facet_probe.facets.option_order import OptionOrder
from facet_probe.facets.prompts import format_answer
from facet_probe.prompts import PromptMode
from facet_probe.runners.hf.llava import LlavaRunner
from facet_probe.testing.tiny_models import tiny_model_path


def reply_for(item, mode: PromptMode) -> str:
    letter = "ABCDEFGH"[item.gold_index]
    return format_answer(mode, letter, f"It is {item.gold}." if mode == PromptMode.COT else "")


def train_tiny_llava(root: Path, n: int = 4, steps: int = 400, seed: int = 0) -> Path:
    out = root / f"llava-trained-n{n}-seed{seed}"
    if (out / "model.safetensors").is_file():
        return out
    src = tiny_model_path("llava", root, seed)
    items = SyntheticVisualMCQ(name="synthetic_visual_mcq", n=n, seed=42).load()
    runner = LlavaRunner(name="tiny", model_id="tiny/llava", local_path=str(src), dtype="float32",
                         generation={"max_new_tokens": 24})
    runner.check_ready()
    facet = OptionOrder()
    eos = runner.tokenizer.eos_token_id
    batch = []
    for item in items:
        for mode in (PromptMode.COT, PromptMode.DIRECT):
            prompt = facet.render(item, list(range(len(item.choices))), mode)
            enc = runner.encode(prompt, reply_for(item, mode))
            enc.input_ids = torch.cat([enc.input_ids, torch.tensor([eos])])
            enc.target_span = (enc.target_span[0], enc.target_span[1] + 1)
            batch.append(enc)
    model = runner.model
    model.requires_grad_(True).train()
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    positions = [list(range(e.target_span[0] - 1, e.target_span[1] - 1)) for e in batch]
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.0
        for enc, pos in zip(batch, positions, strict=True):
            logits = runner.forward_logits(enc, runner.pixel_inputs(enc.images01), pos)
            loss = loss + torch.nn.functional.cross_entropy(logits.float(), enc.target_ids)
        loss.backward()
        opt.step()
        if float(loss) / len(batch) < 1e-3:
            break
    model.eval().requires_grad_(False)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    model.save_pretrained(tmp)
    tmp.rename(out)
    return out
