"""Throughput of an API runner against a rate-limited fake provider, as a share of the limit (goal >= 0.9).

The loopback fake server answers after `--latency` seconds and admits at most `--rps` requests per second
(token bucket with `--burst`); extra requests get 429. Each form of the 429's wait is run in turn: whole-second
`retry-after` ("seconds", the HTTP standard and Anthropic's form), `retry-after-ms` only ("ms"), no hint at
all ("none"), and "headers": whole-second `retry-after` plus the provider's rate-limit headers
(remaining/reset) on every answer, which the engine paces by. The real SDK and the adaptive call engine have to
find the right pace on their own, starting from `--initial` calls in flight.

    python benchmarks/bench_api_throughput.py                      # 402 calls at 20 req/s, every form
    python benchmarks/bench_api_throughput.py --provider anthropic --forms seconds headers
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # facet_probe_dev/ is in the checkout, not installed
from facet_probe.core.prompts import Message, Prompt, TextPart
from facet_probe.runners.api.anthropic import AnthropicRunner
from facet_probe.runners.api.gemini import GeminiRunner
from facet_probe.runners.api.openai import OpenAIRunner
from facet_probe.runners.api.openai_compat import OpenAICompatRunner
from facet_probe.runners.base import Request
from facet_probe_dev.testing.fake_providers import FakeProviderServer

RUNNERS = {
    "openai": (OpenAIRunner, "/v1", {"max_output_tokens": 16}),
    "openai_compat": (OpenAICompatRunner, "/v1", {"max_tokens": 16, "temperature": 0.0}),
    "anthropic": (AnthropicRunner, "", {"max_tokens": 16}),
    "gemini": (GeminiRunner, "", {"max_output_tokens": 16, "temperature": 0.0}),
}
#: form -> (the fake server's retry_after_form, whether it sends rate-limit headers)
FORMS = {"seconds": ("seconds", False), "ms": ("ms", False), "none": ("none", False),
         "headers": ("seconds", True)}


def run_form(args: argparse.Namespace, form: str) -> dict:
    """One run of `args.requests` calls under one 429 form; what it achieved."""
    cls, suffix, generation = RUNNERS[args.provider]
    retry_after_form, headers = FORMS[form]
    requests = [
        Request(key=f"r{i}", prompt=Prompt(system="", messages=(Message("user", (TextPart(f"q{i}"),)),)))
        for i in range(args.requests)
    ]
    with FakeProviderServer(latency_s=args.latency, rps_limit=args.rps, burst=args.burst,
                            retry_after_form=retry_after_form, rate_limit_headers=headers) as server:
        kwargs = {"verify_model": False} if cls is OpenAICompatRunner else {}
        runner = cls(
            name=f"bench_{args.provider}", model_id="bench-model", generation=generation,
            base_url=server.url + suffix, **kwargs,
            concurrency={"initial": args.initial, "max_in_flight": args.max_in_flight, "max_retries": 50,
                         "timeout_s": 30, "backoff_base_s": args.backoff_base},
        )
        runner.check_ready()
        t0, cpu0 = time.perf_counter(), time.process_time()
        done = sum(1 for _, resp in runner.generate(requests) if resp.error is None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        counts = server.fault_counts()
    stats = runner.last_stats.as_dict()  # type: ignore[union-attr]
    return {"form": form, "done": done, "wall": wall, "share": done / wall / args.rps,
            "n429": counts.get("rpm_limit", 0), "cpu_ms": 1000 * cpu / max(1, stats["attempts"]),
            "limit": f"{stats['limit_min']:.1f}/{stats['limit_max']:.1f}/{stats['limit_final']:.1f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--provider", choices=sorted(RUNNERS), default="openai")
    ap.add_argument("--forms", nargs="+", choices=sorted(FORMS), default=list(FORMS))
    ap.add_argument("--rps", type=float, default=20.0, help="the fake server's request-per-second limit")
    ap.add_argument("--burst", type=float, default=4.0, help="token-bucket burst of the limit")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    ap.add_argument("--requests", type=int, default=402)
    ap.add_argument("--initial", type=int, default=4, help="initial concurrency")
    ap.add_argument("--max-in-flight", type=int, default=64)
    ap.add_argument("--backoff-base", type=float, default=2.0, help="backoff_base_s (the shipped configs' 2 s)")
    args = ap.parse_args()

    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        os.environ[env] = "bench-key-not-secret"
    ideal = args.requests / args.rps + args.latency
    print(f"provider={args.provider} requests={args.requests} rps_limit={args.rps:g} burst={args.burst:g} "
          f"latency={args.latency:g}s initial={args.initial} ideal wall={ideal:.2f}s")
    print(f"{'form':<8} {'share':>6} {'429s':>5} {'wall_s':>7} {'done':>5} {'cpu_ms/att':>10}  limit min/max/final")
    for form in args.forms:
        r = run_form(args, form)
        print(f"{r['form']:<8} {r['share']:>6.3f} {r['n429']:>5} {r['wall']:>7.2f} {r['done']:>5} "
              f"{r['cpu_ms']:>10.1f}  {r['limit']}", flush=True)
    print("share = completed calls per second / the server's limit (goal >= 0.9)")


if __name__ == "__main__":
    main()
