"""A tiny LLaVA that answers a few synthetic visual questions correctly, fitted offline in about a second.

Attacks only run on samples the model answers correctly (with a rationale under CoT), which a random
tiny model never does. Rather than fine-tuning the whole model (a minute on two shared cores), this
fits only the LM head of the tiny random LLaVA of `facet_probe_dev.testing.tiny_models`: one teacher-forced
forward over the wanted replies records the LM head's inputs (the final hidden states, which do not
depend on the head), then the 64 x vocab head is fitted to map each to the next wanted token. Greedy
decoding sees the same hidden states, so its replies become exactly the wanted ones: for the first `n`
items of `synthetic_visual_mcq`, ``It is <gold>. The answer is (X).`` under CoT and ``Answer: X``
directly. The image still moves the hidden states, so the attacks have something to push. The folder
loads like a hub checkpoint (``model=tiny_vlm model.local_path=<folder>``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from facet_probe.core.prompts import PromptMode
from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ
from facet_probe.facets.option_order import OptionOrder
from facet_probe.facets.prompts import format_answer
from facet_probe.runners.hf.llava import LlavaRunner
from facet_probe_dev.testing.tiny_models import built_once, tiny_model_path


def reply_for(item, mode: PromptMode) -> str:
    letter = "ABCDEFGH"[item.gold_index]
    return format_answer(mode, letter, f"It is {item.gold}." if mode == PromptMode.COT else "")


def items(n: int):
    return SyntheticVisualMCQ(name="synthetic_visual_mcq", n=n, seed=42).load()


def train_tiny_llava(root: Path, n: int = 4, seed: int = 0, steps: int = 400, family: str = "llava",
                     runner_cls: type = LlavaRunner) -> Path:
    """The folder of the fitted tiny `family` model (LLaVA unless told) under `root` (fitted on first use, then
    reused; fitted once where processes share `root`: `built_once`); any adapter whose LM head is
    `get_output_embeddings()` fits the same way."""
    return built_once(root / f"{family}-answers-n{n}-seed{seed}",
                      lambda out: _fit(tiny_model_path(family, root, seed), out, n, steps, family, runner_cls),
                      done="model.safetensors")


def _fit(src: Path, out: Path, n: int, steps: int, family: str, runner_cls: type) -> None:
    """Fit the LM head of the tiny model at `src` to the wanted replies and save the model to `out`."""
    runner = runner_cls(name="tiny", model_id=f"tiny/{family}", local_path=str(src), dtype="float32")
    runner.check_ready()
    facet = OptionOrder()
    eos = runner.tokenizer.eos_token_id
    feats, targets = [], []
    head = runner.model.get_output_embeddings()
    seen: list[torch.Tensor] = []
    hook = head.register_forward_hook(lambda m, i, o: seen.append(i[0].detach().reshape(-1, i[0].shape[-1])))
    try:
        with torch.no_grad():
            for item in items(n):
                for mode in (PromptMode.COT, PromptMode.DIRECT):
                    enc = runner.encode(facet.render(item, list(range(len(item.choices))), mode),
                                        reply_for(item, mode))
                    a, b = enc.target_span
                    enc.input_ids = torch.cat([enc.input_ids, torch.tensor([eos])])  # ... then stop
                    enc.token_fields = {k: torch.cat([v, v[-1:]]) for k, v in enc.token_fields.items()}
                    runner.forward_logits(enc, runner.pixel_inputs(enc.images01), list(range(a - 1, b)))
                    feats.append(seen.pop())
                    targets.append(enc.input_ids[a:b + 1])
    finally:
        hook.remove()
    x, y = torch.cat(feats), torch.cat(targets)
    weight = head.weight.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([weight], lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ weight.T, y)
        loss.backward()
        opt.step()
    head.weight.data.copy_(weight.detach())
    if not bool(((x @ head.weight.T).argmax(-1) == y).all()):
        raise RuntimeError("the tiny LM head could not fit the wanted replies")
    shutil.copytree(src, out)
    runner.model.save_pretrained(out)
