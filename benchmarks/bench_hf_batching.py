"""Serial (batch 1) vs batched generation through the HF runner on the same tiny model and trials.

Prints trials/s for both, the speed-up (goal: batched >= 4x serial on 2 CPU cores) and whether any answer
differs between batch 1 and batch N. Every trial generates exactly --max-new-tokens tokens (min = max), so
both modes do the same work whatever the random model emits.

    python benchmarks/bench_hf_batching.py [--family llava] [--trials 48] [--batch-size 16]
        [--max-new-tokens 16] [--threads 1] [--device cpu|cuda] [--dtype float32|bfloat16]
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
from facet_probe.runners.base import Request  # noqa: E402
from facet_probe.runners.hf.gemma3 import Gemma3Runner  # noqa: E402
from facet_probe.runners.hf.internvl import InternVLRunner  # noqa: E402
from facet_probe.runners.hf.llava import LlavaRunner  # noqa: E402
from facet_probe.runners.hf.qwen import QwenRunner  # noqa: E402
from facet_probe_dev.testing.tiny_models import image_requests, tiny_model_path  # noqa: E402

RUNNERS = {"llava": (LlavaRunner, {}), "qwen3_5": (QwenRunner, {"thinking": False}), "qwen2_5_vl": (QwenRunner, {}),
           "internvl": (InternVLRunner, {}), "gemma3": (Gemma3Runner, {})}


trials = image_requests


def run(runner, requests: list[Request]) -> tuple[float, dict[str, str]]:
    t0 = time.perf_counter()
    answers = {req.key: resp.text for req, resp in runner.generate(requests)}
    return time.perf_counter() - t0, answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="llava", choices=sorted(RUNNERS))
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cls, family_keys = RUNNERS[args.family]
    with tempfile.TemporaryDirectory() as root:
        common = {"name": f"tiny_{args.family}", "model_id": f"tiny/{args.family}",
                  "local_path": str(tiny_model_path(args.family, root)), "dtype": args.dtype, "device": args.device,
                  "generation": {"max_new_tokens": args.max_new_tokens, "min_new_tokens": args.max_new_tokens},
                  **family_keys}
        serial, batched = cls(batch_size=1, **common), cls(batch_size=args.batch_size, **common)
        serial.check_ready()
        batched.check_ready()
        requests = trials(args.trials)
        run(serial, requests[:2])  # warm-up (first-call allocations, lazy imports)
        run(batched, requests[:2])
        t_serial, a_serial = run(serial, requests)
        t_batched, a_batched = run(batched, requests)

    differ = sorted(k for k in a_serial if a_serial[k] != a_batched[k])
    speedup = t_serial / t_batched
    print(f"family={args.family} trials={args.trials} max_new_tokens={args.max_new_tokens} "
          f"threads={args.threads} device={args.device} dtype={args.dtype} "
          f"attn={batched.provenance['attn_implementation']}")
    print(f"serial  (batch 1):  {args.trials / t_serial:8.2f} trials/s  ({t_serial:.2f} s)")
    print(f"batched (batch {args.batch_size}): {args.trials / t_batched:8.2f} trials/s  ({t_batched:.2f} s)")
    print(f"speed-up: {speedup:.1f}x (goal >= 4x: {'met' if speedup >= 4 else 'NOT met'})")
    print(f"answers differing between batch 1 and batch {args.batch_size}: {len(differ)} of {args.trials}"
          + (f" ({', '.join(differ[:8])})" if differ else ""))


if __name__ == "__main__":
    main()
