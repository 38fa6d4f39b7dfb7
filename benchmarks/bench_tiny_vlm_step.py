"""Time one training step of the tiny VLM on the real batches: the default path against `--fast`.

    python benchmarks/bench_tiny_vlm_step.py [--steps 20] [--batch 16] [--threads 1] [--no-compile]
                                             [--set synthetic_mixed] [--optimizer muon|adamw]

Builds the shipped architecture from the committed processor (facet_probe/assets/tiny_vlm) with fresh
weights, draws packed batches of every synthetic set (or of one, `--set`) as `make tiny-vlm` does
(`data.packed_stream`, `collate_packed`), and times forward + backward + the optimiser's step on them
(`optim.build_optimizer`, the trainer's default unless `--optimizer`):

- seconds per step on the default path (every position through the vocabulary projection);
- the same with only the reply positions projected (`reply_loss(replies_only=True)`);
- the same with the language model compiled too, as `--fast true` trains (`compile_language_model`):
  the compiling and the first steps (reported apart), then the steady state on the same batches, and on
  as many new batches (new shapes, as a real run meets them: what a recompile would cost shows there);
- and the two paths paired, a default step and a fast step on each new batch back to back: their ratio
  is what the host's drift between the separate timings above cannot move.

The training budget of issue 9 is set by this figure (docs/tiny_vlm.md, "Next"). One process; the
trainer runs two, one per core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from transformers import LlavaProcessor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # facet_probe_dev/ is in the checkout, not installed
from facet_probe.config.schema import asset_path  # noqa: E402
from facet_probe_dev.tiny_vlm import echo  # noqa: E402
from facet_probe_dev.tiny_vlm.architecture import TinyVLMSpec, build_model  # noqa: E402
from facet_probe_dev.tiny_vlm.data import Pool, available_sets, collate_packed, packed_stream  # noqa: E402
from facet_probe_dev.tiny_vlm.optim import OPTIMIZERS, build_optimizer  # noqa: E402
from facet_probe_dev.tiny_vlm.train import TrainConfig, compile_language_model, reply_loss  # noqa: E402


def batches(processor, n: int, batch: int, sets: list[str], seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """`n` training batches drawn as the trainer draws them (`sets` at equal weights)."""
    pool = Pool.load(sets, 40)
    stream = packed_stream(processor, pool, {s: 1.0 for s in sets}, seed=seed)
    pad = processor.tokenizer.pad_token_id
    return [collate_packed([next(stream) for _ in range(batch)], pad) for _ in range(n)]


def timed_step(model, opt, batch: dict[str, torch.Tensor], replies_only: bool) -> float:
    """Seconds for one forward + backward + optimiser step."""
    t0 = time.perf_counter()
    loss, _ = reply_loss(model, batch, replies_only=replies_only)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def optimizer(model, kind: str):
    opt = build_optimizer(model, kind, TrainConfig.weight_decay)
    for group in opt.param_groups:
        group["lr"] = 1e-3
    return opt


def timed_steps(model, data: list[dict[str, torch.Tensor]], kind: str, replies_only: bool = True) -> list[float]:
    opt = optimizer(model, kind)
    return [timed_step(model, opt, b, replies_only) for b in data]


def paired_speedups(default, fast, data: list[dict[str, torch.Tensor]], kind: str) -> list[float]:
    """Per batch, a default-path step then a fast-path step, back to back: the ratio of their times, which
    the host's drift over minutes (10-20 % on shared cores) does not move."""
    opt_default, opt_fast = optimizer(default, kind), optimizer(fast, kind)
    return [timed_step(default, opt_default, b, False) / timed_step(fast, opt_fast, b, True) for b in data]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16, help="examples per step (the trainer: 32 over 2 processes)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--set", dest="sets", action="append",
                    help="draw the batches from this set only (repeatable; default: every set and the echo task)")
    ap.add_argument("--optimizer", choices=list(OPTIMIZERS), default=TrainConfig.optimizer)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    processor = LlavaProcessor.from_pretrained(asset_path("tiny_vlm"))
    sets = args.sets or [*available_sets(), echo.NAME]
    data = batches(processor, args.steps, args.batch, sets)
    tokens = statistics.mean(int(b["input_ids"].numel()) for b in data)
    print(f"{args.steps} batches of {args.batch} packed examples of {', '.join(sets) if args.sets else 'every set'}, "
          f"{tokens:.0f} token slots each; {args.threads} thread(s), {args.optimizer}, torch {torch.__version__}")

    full = timed_steps(build_model(TinyVLMSpec(), processor.tokenizer, seed=0).train(), data, args.optimizer,
                       replies_only=False)
    print(f"default:      {statistics.median(full):.3f} s/step (median), first {full[0]:.3f} s")
    eager = timed_steps(build_model(TinyVLMSpec(), processor.tokenizer, seed=0).train(), data, args.optimizer)
    print(f"replies only: {statistics.median(eager):.3f} s/step (median): "
          f"{statistics.median(full) / statistics.median(eager):.2f}x the default")
    if args.no_compile:
        return
    compiled = build_model(TinyVLMSpec(), processor.tokenizer, seed=0).train()
    t0 = time.perf_counter()
    if why_not := compile_language_model(compiled):
        print(f"fast:         compiling unavailable: {why_not}")
        return
    first = timed_steps(compiled, data, args.optimizer)
    steady = timed_steps(compiled, data, args.optimizer)
    print(f"fast:         {time.perf_counter() - t0 - sum(steady):.1f} s to compile and take the first "
          f"{len(first)} steps, then {statistics.median(steady):.3f} s/step (median): "
          f"{statistics.median(full) / statistics.median(steady):.2f}x the default")
    fresh = batches(processor, args.steps, args.batch, sets, seed=1)
    new = timed_steps(compiled, fresh, args.optimizer)
    print(f"fast, new batches: {statistics.median(new):.3f} s/step (median), mean {statistics.mean(new):.3f} s, "
          f"slowest {max(new):.3f} s")
    paired = paired_speedups(build_model(TinyVLMSpec(), processor.tokenizer, seed=0).train(), compiled, fresh,
                             args.optimizer)
    print(f"paired (default then fast on each new batch): fast {statistics.median(paired):.2f}x the default "
          f"(median of per-batch ratios; range {min(paired):.2f}-{max(paired):.2f})")


if __name__ == "__main__":
    main()
