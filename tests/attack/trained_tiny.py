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


def train_tiny_llava(root: Path, n: int = 4, steps: int = 300, seed: int = 0, lr: float = 1e-2,
                     stop_loss: float = 0.01) -> Path:
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
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    inputs = runner._collate(batch, [runner.pixel_inputs(e.images01) for e in batch], prompt_only=False)
    width = inputs["input_ids"].shape[1]
    labels = torch.full_like(inputs["input_ids"], -100)
    for i, e in enumerate(batch):  # left padded: row i's tokens end at `width`
        a, b = e.target_span
        labels[i, width - len(e) + a:width - len(e) + b] = e.target_ids
    for step in range(steps):
        opt.zero_grad()
        logits = model(**inputs, use_cache=False).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        if step % 10 == 0: print(step, float(loss.detach()))
        if float(loss.detach()) < stop_loss:
            break
    model.eval().requires_grad_(False)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    model.save_pretrained(tmp)
    tmp.rename(out)
    return out
