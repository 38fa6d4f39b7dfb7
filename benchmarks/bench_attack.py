"""Time the attack's building blocks: a PGD step, a pseudo-target refresh, and their ratio.

    python benchmarks/bench_attack.py [--families llava qwen3_5] [--steps 10] [--max-new-tokens 48]
                                      [--batch 4] [--model-path <save_pretrained folder of a LLaVA-style model>]

On tiny models built offline (facet_probe_dev.testing.tiny_models; the project's tiny VLM too when its weights
are in facet_probe/assets/tiny_vlm), with synthetic_visual_mcq prompts under CoT and a 12-token pseudo-target:

- seconds per PGD step (teacher-forced forward + backward to the pixels + sign step + projection), one
  sample at a time and `--batch` samples in one batched forward;
- seconds per refresh (greedy generation of up to `--max-new-tokens` tokens on the current image), alone
  and batched;
- the ratio step / generate: why the paper teacher-forces the pseudo-target at every step and generates
  only every `update_every` steps.

One thread (the machine is shared); on a GPU box run it with a real model for meaningful figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # facet_probe_dev/ is in the checkout, not installed
from facet_probe.attack.batching import ModelOps  # noqa: E402
from facet_probe.attack.config import AttackSettings  # noqa: E402
from facet_probe.attack.objectives import AnswerObjective, Sample  # noqa: E402
from facet_probe.attack.outputs import sample_ids  # noqa: E402
from facet_probe.attack.pgd import Timings, run_pgd  # noqa: E402
from facet_probe.core.prompts import PromptMode  # noqa: E402
from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ  # noqa: E402
from facet_probe.facets.option_order import OptionOrder  # noqa: E402
from facet_probe.runners.hf.llava import LlavaRunner  # noqa: E402
from facet_probe.runners.hf.qwen import QwenRunner  # noqa: E402
from facet_probe_dev.testing.tiny_models import tiny_model_path  # noqa: E402

ADAPTERS = {"llava": (LlavaRunner, {}), "qwen3_5": (QwenRunner, {"thinking": False}),
            "qwen2_5_vl": (QwenRunner, {})}


def make_samples(n: int) -> list[Sample]:
    items = SyntheticVisualMCQ(name="synthetic_visual_mcq", n=n, seed=42).load()
    ids = sample_ids([it.item_id for it in items])
    out = []
    for it in items:
        p = OptionOrder().render(it, list(range(len(it.choices))), PromptMode.COT)
        out.append(Sample(ids[it.item_id], it.item_id, p, p.labels, p.labels[it.gold_index]))
    return out


def time_steps(runner, samples, steps: int, batch: int) -> float:
    """Seconds per batched PGD step (no refresh in between)."""
    s = AttackSettings(name="answer", objective=AnswerObjective(), steps=steps, update_every=10 * steps + 1,
                       early_stop=False)
    replies = [f"It is round and red. The answer is ({x.gold})." for x in samples]
    run_pgd(runner, samples[:1], replies[:1], s.objective, AttackSettings(name="answer", objective=s.objective, steps=1),
            ops=ModelOps(runner, 1), max_new_tokens=1)  # warm-up
    timings = Timings()
    run_pgd(runner, samples, replies, s.objective, s, ops=ModelOps(runner, batch), max_new_tokens=1,
            timings=timings)
    return timings.step_s / timings.steps


def time_generate(runner, samples, max_new: int, batch: int, repeats: int = 3) -> float:
    """Seconds per batched greedy generation (random tiny models rarely stop before `max_new` tokens)."""
    ops = ModelOps(runner, batch)
    encs = [runner.encode(s.prompt) for s in samples]
    with torch.no_grad():
        pixels = [runner.pixel_inputs(e.images01) for e in encs]
        ops.generate(encs[:1], pixels[:1], 2)  # warm-up
        t0 = time.perf_counter()
        for _ in range(repeats):
            ops.generate(encs, pixels, max_new)
    return (time.perf_counter() - t0) / repeats / max(1, -(-len(encs) // batch))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", nargs="+", default=["llava", "qwen3_5"], choices=sorted(ADAPTERS))
    ap.add_argument("--model-path", help="also time this LLaVA-style save_pretrained folder")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)

    models: list[tuple[str, type, dict, Path]] = []
    root = Path(tempfile.mkdtemp(prefix="bench_attack_"))
    for fam in args.families:
        cls, kw = ADAPTERS[fam]
        models.append((f"tiny {fam}", cls, kw, tiny_model_path(fam, root)))
    asset = Path(__file__).resolve().parents[1] / "facet_probe" / "assets" / "tiny_vlm"
    if (asset / "config.json").is_file():
        models.append(("tiny_vlm (project)", LlavaRunner, {}, asset))
    if args.model_path:
        models.append((Path(args.model_path).name, LlavaRunner, {}, Path(args.model_path)))

    samples = make_samples(args.batch)
    print(f"one thread; {args.steps} PGD steps; refresh = greedy generation of up to {args.max_new_tokens} tokens; "
          f"batch = {args.batch} samples\n")
    head = f"{'model':22} {'step 1':>9} {'step B':>9} {'step B/smp':>10} {'gen 1':>9} {'gen B':>9} {'step/gen':>8}"
    print(head)
    print("-" * len(head))
    for label, cls, kw, path in models:
        runner = cls(name=label, model_id=label, local_path=str(path), dtype="float32",
                     generation={"max_new_tokens": args.max_new_tokens}, **kw)
        runner.check_ready()
        step1 = time_steps(runner, samples[:1], args.steps, 1)
        stepb = time_steps(runner, samples, args.steps, args.batch)
        gen1 = time_generate(runner, samples[:1], args.max_new_tokens, 1)
        genb = time_generate(runner, samples, args.max_new_tokens, args.batch)
        print(f"{label:22} {step1:9.4f} {stepb:9.4f} {stepb / len(samples):10.4f} {gen1:9.4f} {genb:9.4f} "
              f"{step1 / gen1:8.3f}")
        runner.close()
    print("\nseconds; 'step B/smp' = a batched step per sample; 'gen' = one refresh (greedy generation); "
          "'step/gen' = one teacher-forced PGD step / one full greedy generation (batch 1).")


if __name__ == "__main__":
    main()
