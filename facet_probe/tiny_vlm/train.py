"""Train the tiny VLM on the synthetic sets' train splits and save it as a `save_pretrained` folder.

``python -m facet_probe.tiny_vlm.train [--out DIR] [--steps N] ...`` (``make tiny-vlm``): CPU only,
seeded (the same machine and thread count reproduce the same weights), a wall-clock budget that
stops training early if the machine is slower than expected. It writes the model, the processor
(tokenizer, chat template, image processor), `training_log.json` and `MODEL_CARD.md` (with the
accuracy per synthetic dataset, direct and chain-of-thought, measured on the saved weights).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from facet_probe.prompts import PromptMode
from facet_probe.tiny_vlm.architecture import TinyVLMSpec, build_model, build_processor, count_parameters
from facet_probe.tiny_vlm.data import (
    Example,
    Pool,
    available_sets,
    collate,
    example_stream,
    generator_version,
    tokenizer_corpus,
)
from facet_probe.tiny_vlm.evaluate import build_cases, evaluate, format_table
from facet_probe.tiny_vlm.tokenizer import IMAGE_TOKEN, prompt_phrases, train_tokenizer


@dataclass
class TrainConfig:
    seed: int = 0
    steps: int = 3000
    batch_size: int = 32
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    p_cot: float = 0.5
    n_per_set: int = 4000  # train items loaded per set
    vocab_size: int = 1024
    bucket: int = 16  # batches drawn at once and grouped by length (less padding)
    eval_every: int = 500
    eval_n: int = 12  # test items per set in the quick evaluations (items 200.. of the test split)
    eval_offset: int = 200
    threads: int = 1
    budget_s: float = 0.0  # if > 0: stop training when this much wall time has passed (not reproducible)
    autocast_bf16: bool = True
    lm_steps: int = 0  # warm-up steps that add a next-token loss on the whole text (prompt included)
    lm_weight: float = 1.0
    weights: dict[str, float] = field(default_factory=dict)  # per-set mixing weights (default 1)
    spec: TinyVLMSpec = field(default_factory=TinyVLMSpec)


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def batches(stream: Iterator[Example], cfg: TrainConfig, rng: random.Random) -> Iterator[list[Example]]:
    """Draw `bucket` batches' worth of examples, sort by length, cut into batches, shuffle them."""
    while True:
        chunk = [next(stream) for _ in range(cfg.batch_size * cfg.bucket)]
        chunk.sort(key=len)
        group = [chunk[i: i + cfg.batch_size] for i in range(0, len(chunk), cfg.batch_size)]
        rng.shuffle(group)
        yield from group


def losses(model, batch: dict[str, torch.Tensor], image_token_id: int,
           with_lm: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(reply loss, language-modelling loss or None).

    The reply loss is the cross-entropy on the reply tokens (the labels), averaged within each
    example, then over the batch (a short direct reply weighs as much as a long chain-of-thought one).
    The LM loss (warm-up only) is the next-token cross-entropy on every text token of the sequence,
    prompt included (image placeholders and padding excluded)."""
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs, use_cache=False).logits[:, :-1].float()
    target = labels[:, 1:]
    tok_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=-100,
                                                 reduction="none")
    mask = (target != -100).float()
    reply = ((tok_loss * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    if not with_lm:
        return reply, None
    text = batch["input_ids"][:, 1:]
    keep = (batch["attention_mask"][:, 1:] == 1) & (text != image_token_id)
    lm_target = torch.where(keep, text, torch.full_like(text, -100))
    lm = torch.nn.functional.cross_entropy(logits.transpose(1, 2), lm_target, ignore_index=-100)
    return reply, lm


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def train(cfg: TrainConfig, out: Path, log=print) -> dict:
    t_start, cpu_start = time.perf_counter(), cpu_seconds()
    torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    sets = available_sets()
    weights = {s: cfg.weights.get(s, 1.0) for s in sets}
    log(f"sets: {sets}  generator {generator_version()}")

    pool = Pool.load(sets, cfg.n_per_set)
    tokenizer = train_tokenizer(tokenizer_corpus(pool, cfg.seed), cfg.vocab_size, prompt_phrases())
    processor = build_processor(cfg.spec, tokenizer)
    model = build_model(cfg.spec, tokenizer, cfg.seed)
    n_params = count_parameters(model)
    image_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    log(f"vocab {len(tokenizer)}, parameters {n_params:,}; data ready in {time.perf_counter() - t_start:.1f} s")

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.98))
    quick_cases = {str(m): build_cases(sets, cfg.eval_n, 1, m, offset=cfg.eval_offset)
                   for m in (PromptMode.DIRECT, PromptMode.COT)} if cfg.eval_every else {}
    stream = example_stream(processor, pool, weights, cfg.seed, cfg.p_cot)
    batch_iter = batches(stream, cfg, random.Random(cfg.seed + 1))
    history: list[dict] = []
    evals: list[dict] = []
    tokens = answer_tokens = 0
    t_train = time.perf_counter()
    ema = None
    data_s = eval_s = 0.0
    step = 0
    stopped = "steps"
    model.train()
    for step in range(cfg.steps):
        if cfg.budget_s and time.perf_counter() - t_start > cfg.budget_s:
            stopped = "budget"
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        t_data = time.perf_counter()
        batch = collate(next(batch_iter), tokenizer.pad_token_id)
        data_s += time.perf_counter() - t_data
        with_lm = step < cfg.lm_steps
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.autocast_bf16):
            reply, lm = losses(model, batch, image_id, with_lm)
        loss = reply if lm is None else reply + cfg.lm_weight * lm
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += int(batch["attention_mask"].sum())
        answer_tokens += int((batch["labels"] != -100).sum())
        ema = reply.item() if ema is None else 0.95 * ema + 0.05 * reply.item()
        if (step + 1) % 50 == 0:
            el = time.perf_counter() - t_train
            history.append({"step": step + 1, "loss": round(ema, 4), "elapsed_s": round(el, 1)})
            log(f"step {step + 1:5d}  loss {ema:.4f}  lr {lr_at(step, cfg):.2e}  {tokens / el:,.0f} tok/s  "
                f"{el:.0f} s (data {data_s:.0f} s, eval {eval_s:.0f} s, cpu {cpu_seconds() - cpu_start:.0f} s)")
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
            model.eval()
            t_eval = time.perf_counter()
            res = evaluate(sets, cfg.eval_n, 1, [PromptMode.DIRECT, PromptMode.COT], model=model,
                           processor=processor, cases=quick_cases)
            eval_s += time.perf_counter() - t_eval
            model.train()
            evals.append({"step": step + 1, "results": [asdict(r) for r in res]})
            log(format_table(res))
    steps_done = step + 1 if stopped == "steps" else step
    train_s = time.perf_counter() - t_train
    model.eval()
    save(model, processor, out)
    summary = {
        "generator_version": generator_version(),
        "sets": sets,
        "weights": weights,
        "config": {**asdict(cfg), "spec": cfg.spec.to_dict()},
        "parameters": n_params,
        "vocab_size": len(tokenizer),
        "steps": steps_done,
        "stopped_by": stopped,
        "examples_seen": steps_done * cfg.batch_size,
        "tokens_seen": tokens,
        "answer_tokens_seen": answer_tokens,
        "train_wall_s": round(train_s, 1),
        "total_wall_s": round(time.perf_counter() - t_start, 1),
        "cpu_s": round(cpu_seconds() - cpu_start, 1),
        "threads": cfg.threads,
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpu_count": os.cpu_count(), "torch": torch.__version__},
        "history": history,
        "quick_evals": evals,
    }
    (out / "training_log.json").write_text(json.dumps(summary, indent=1))
    return summary


def save(model, processor, out: Path) -> None:
    """Standard `save_pretrained` folder; weights stored in bfloat16... unless `FP_TINY_VLM_DTYPE`."""
    if out.exists():
        for child in out.iterdir():
            if child.name != "__init__.py":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    dtype = getattr(torch, os.environ.get("FP_TINY_VLM_DTYPE", "bfloat16"))
    model.to(dtype).save_pretrained(out)
    model.to(torch.float32)
    processor.save_pretrained(out)


def parse_args(argv: Sequence[str] | None) -> tuple[TrainConfig, argparse.Namespace]:
    from facet_probe.config import asset_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=asset_path("tiny_vlm"))
    ap.add_argument("--card-n", type=int, default=50, help="test items per set for the model card")
    ap.add_argument("--card-k", type=int, default=2, help="audit orderings per item for the model card")
    ap.add_argument("--no-card", action="store_true")
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        if isinstance(value, bool):
            ap.add_argument(f"--{name.replace('_', '-')}", type=lambda s: s.lower() in ("1", "true", "yes"),
                            default=value)
        elif isinstance(value, int | float):
            ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    ap.add_argument("--weight", action="append", default=[], help="SET=W mixing weight (repeatable)")
    for name, value in asdict(defaults.spec).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = ap.parse_args(argv)
    spec = TinyVLMSpec(**{k: getattr(args, k) for k in asdict(defaults.spec)})
    weights = {w.split("=")[0]: float(w.split("=")[1]) for w in args.weight}
    cfg = TrainConfig(**{k: getattr(args, k) for k in asdict(defaults) if k not in ("spec", "weights")},
                      weights=weights, spec=spec)
    return cfg, args


def main(argv: Sequence[str] | None = None) -> None:
    cfg, args = parse_args(argv)
    out = Path(args.out)
    summary = train(cfg, out)
    print(f"trained {summary['steps']} steps in {summary['train_wall_s']} s "
          f"(total {summary['total_wall_s']} s wall, {summary['cpu_s']} s CPU)")
    if not args.no_card:
        from facet_probe.tiny_vlm.card import write_card

        write_card(out, summary, n=args.card_n, k=args.card_k)


if __name__ == "__main__":
    main()
