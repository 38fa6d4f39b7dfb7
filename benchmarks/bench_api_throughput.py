"""Throughput of an API runner against a rate-limited fake provider, as a share of the limit (goal >= 0.9).

The loopback fake server answers after `--latency` seconds and admits at most `--rps` requests per second
(token bucket with `--burst`); extra requests get 429 with Retry-After. The real SDK and the adaptive call
engine have to find the right concurrency on their own, starting from `--initial`.

    python benchmarks/bench_api_throughput.py --provider openai --rps 40 --latency 0.2 --requests 800
"""

from __future__ import annotations

import argparse
import os
import time

from facet_probe.prompts import Message, Prompt, TextPart
from facet_probe.runners.api.anthropic import AnthropicRunner
from facet_probe.runners.api.gemini import GeminiRunner
from facet_probe.runners.api.openai import OpenAIRunner
from facet_probe.runners.api.openai_compat import OpenAICompatRunner
from facet_probe.runners.base import Request
from facet_probe.testing.fake_providers import FakeProviderServer

RUNNERS = {
    "openai": (OpenAIRunner, "/v1", {"max_output_tokens": 16}),
    "openai_compat": (OpenAICompatRunner, "/v1", {"max_tokens": 16, "temperature": 0.0}),
    "anthropic": (AnthropicRunner, "", {"max_tokens": 16}),
    "gemini": (GeminiRunner, "", {"max_output_tokens": 16, "temperature": 0.0}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--provider", choices=sorted(RUNNERS), default="openai")
    ap.add_argument("--rps", type=float, default=40.0, help="the fake server's request-per-second limit")
    ap.add_argument("--burst", type=float, default=4.0, help="token-bucket burst of the limit")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--initial", type=int, default=4, help="initial concurrency")
    ap.add_argument("--max-in-flight", type=int, default=64)
    args = ap.parse_args()

    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        os.environ[env] = "bench-key-not-secret"
    cls, suffix, generation = RUNNERS[args.provider]
    requests = [
        Request(key=f"r{i}", prompt=Prompt(system="", messages=(Message("user", (TextPart(f"q{i}"),)),)))
        for i in range(args.requests)
    ]
    with FakeProviderServer(latency_s=args.latency, rps_limit=args.rps, burst=args.burst) as server:
        kwargs = {"verify_model": False} if cls is OpenAICompatRunner else {}
        runner = cls(
            name=f"bench_{args.provider}",
            model_id="bench-model",
            generation=generation,
            base_url=server.url + suffix,
            **kwargs,
            concurrency={
                "initial": args.initial,
                "max_in_flight": args.max_in_flight,
                "max_retries": 50,
                "timeout_s": 30,
                "backoff_base_s": 0.05,
            },
        )
        runner.check_ready()
        t0, cpu0 = time.perf_counter(), time.process_time()
        done = sum(1 for _, resp in runner.generate(requests) if resp.error is None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        counts = server.fault_counts()
    stats = runner.last_stats.as_dict()  # type: ignore[union-attr]
    ideal = args.requests / args.rps + args.latency
    achieved = done / wall
    print(
        f"provider={args.provider} requests={args.requests} rps_limit={args.rps:g} burst={args.burst:g} "
        f"latency={args.latency:g}s initial={args.initial}"
    )
    print(f"completed={done} wall={wall:.2f}s (ideal {ideal:.2f}s) achieved={achieved:.1f} req/s")
    print(
        f"CPU (client + in-process server): {1000 * cpu / max(1, stats['attempts']):.1f} ms per attempt, "
        f"{100 * cpu / wall:.0f}% of one core"
    )
    print(f"throughput share of the limit: {achieved / args.rps:.3f}  (goal >= 0.9)")
    print(
        f"server: {counts}  engine: attempts={stats['attempts']} failures={stats['failures']} "
        f"limit min/max/final={stats['limit_min']:.1f}/{stats['limit_max']:.1f}/{stats['limit_final']:.1f}"
    )


if __name__ == "__main__":
    main()
