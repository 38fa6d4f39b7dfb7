"""The HF runner against a bare batched `generate` loop on the same requests of the offline panel.

    python benchmarks/bench_hf_vs_bare.py [--items-per-cell 4] [--pairs 7] [--facets image_set_order ...]
        [--model tiny_vlm] [--threads 1] [--runner-setting image_features_cache=0] [--whole-prompts-side]
        [--profile runner|bare]

The requests are the audit's own: the offline panel (`experiment=offline`, K = 6, direct prompts) with
`--items-per-cell` items in each of its six cells (4: 144 requests, 72 of them with 1 to 5 images), planned by
the project (`plan_model`, `call_requests`), optionally narrowed to some facets (`--facets image_set_order
mixed_modality_order`: the facets whose prompts show several images). Both sides run them on the same loaded
model object:

- runner: `runner.generate(requests)`, what `python -m facet_probe` runs (the context check, encoding, each image
  decoded once per window and encoded by the vision tower once, batching, each batch's shared prompt prefixes
  prefilled once, decoding, provenance);
- bare: what a transformers user writes: per window of requests (the runner's window, `max(32, 8 * batch_size)`),
  each prompt through the checkpoint's chat template and its `AutoProcessor` (images decoded from their PNG bytes),
  sorted longest first, `batch_size` at a time left-padded into `model.generate` (greedy), new tokens decoded.

Timed in alternating rounds (runner, bare, runner, ...; with `--whole-prompts-side` also the runner with
`prefix_reuse=false` in each round) after one warm-up each; prints the median trials/s of each side, its ratio
to bare of the medians, of the rounds and of the fastest runs (goal: runner >= 1.2x bare on the whole
panel; 2x on the image facets), whether every reply is the same, and how many prompt tokens came from shared
prefixes. `--profile` runs one side once more under cProfile and prints where its time went. One torch thread
by default, as the tests and the tiny VLM's runs use.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from facet_probe.runners.base import Request  # noqa: E402
from facet_probe.runners.hf.encoding import chat_messages  # noqa: E402


def panel_requests(model: str, items_per_cell: int, facets: list[str] | None, settings: list[str]):
    """The loaded runner and the audit's requests for the offline panel (`items_per_cell` items per cell)."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    from facet_probe.audit import plan as audit
    from facet_probe.audit.execute import call_requests
    from facet_probe.config.schema import register

    register()
    overrides = ["experiment=offline", f"model={model}", "progress=false", f"limit={items_per_cell}",
                 *[f"model.{s}" for s in settings]]
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    cells = [c for c in audit.resolve_cells(cfg, None, None) if not facets or c.facet_name in facets]
    audit.load_cell_items(cells, cfg, None)
    rows = audit.build_run_manifest(cells, cfg)
    runner = instantiate(cfg.model, _convert_="all")
    by_call = defaultdict(list)
    for plan in audit.plan_model(runner, runner.name, cells, rows, cfg).planned:
        by_call[plan.call_key].append(plan)
    return runner, call_requests(by_call)


def run_runner(runner, requests: list[Request]) -> dict[str, str]:
    """The audit's generation from a cold start: no image features kept from an earlier pass."""
    runner.forget_images()
    return {req.key: resp.text for req, resp in runner.generate(requests)}


def run_bare(model, processor, requests: list[Request], batch_size: int, max_new_tokens: int) -> dict[str, str]:
    """A plain transformers loop: chat template, processor, length-sorted left-padded batches, greedy generate."""
    from PIL import Image

    tok = processor.tokenizer
    window = max(32, 8 * batch_size)
    answers = {}
    for start in range(0, len(requests), window):
        encoded = []
        for req in requests[start:start + window]:
            text = processor.apply_chat_template(chat_messages(req.prompt), add_generation_prompt=True, tokenize=False)
            images = [Image.open(io.BytesIO(ref.read_bytes())).convert("RGB") for ref in req.prompt.images()]
            enc = processor(text=[text], images=images or None, return_tensors="pt",
                            add_special_tokens=not (tok.bos_token and text.startswith(tok.bos_token)))
            encoded.append((req.key, enc))
        encoded.sort(key=lambda e: -e[1]["input_ids"].shape[1])
        for i in range(0, len(encoded), batch_size):
            chunk = encoded[i:i + batch_size]
            batch = tok.pad({"input_ids": [e["input_ids"][0].tolist() for _, e in chunk]}, padding_side="left",
                            return_tensors="pt")
            pixels = [e["pixel_values"] for _, e in chunk if "pixel_values" in e]
            if pixels:
                batch["pixel_values"] = torch.cat(pixels).to(model.dtype)
            with torch.no_grad():
                out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False)
            for (key, _), row in zip(chunk, out[:, batch["input_ids"].shape[1]:], strict=True):
                answers[key] = tok.decode(row, skip_special_tokens=True).strip()
    return answers


def timed(fn) -> tuple[float, dict[str, str]]:
    t0 = time.perf_counter()
    answers = fn()
    return time.perf_counter() - t0, answers


def profile(fn, top: int) -> None:
    prof = cProfile.Profile()
    prof.runcall(fn)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny_vlm", help="a LLaVA-family model config (conf/model)")
    ap.add_argument("--items-per-cell", type=int, default=4)
    ap.add_argument("--facets", nargs="+", default=None, help="only these facets' cells (default: all six)")
    ap.add_argument("--pairs", type=int, default=7, help="rounds: each side timed once per round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runner-setting", action="append", default=[],
                    help="a model setting for the runner, e.g. image_features_cache=0 (repeatable)")
    ap.add_argument("--whole-prompts-side", action="store_true",
                    help="also time the runner with prefix_reuse=false in the same rounds")
    ap.add_argument("--profile", choices=("runner", "bare"), default=None)
    ap.add_argument("--top", type=int, default=40, help="profile lines")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import AutoProcessor

    runner, requests = panel_requests(args.model, args.items_per_cell, args.facets, args.runner_setting)
    processor = AutoProcessor.from_pretrained(runner.folder)
    max_new = int(runner.effective_generation()["max_new_tokens"])

    def side_runner(prefix_reuse: bool):
        def run():
            runner.prefix_reuse = prefix_reuse and configured_reuse
            return run_runner(runner, requests)
        return run

    def side_bare():
        return run_bare(runner.model, processor, requests, runner.batch_size, max_new)

    configured_reuse = runner.prefix_reuse
    sides = {"runner": side_runner(True), "bare": side_bare}
    if args.whole_prompts_side:  # the runner again with each prompt prefilled whole, in the same rounds
        sides["runner, prefix_reuse=false"] = side_runner(False)
    with_images = sum(bool(r.prompt.images()) for r in requests)
    print(f"model={args.model} requests={len(requests)} ({with_images} with images, "
          f"{sum(len(r.prompt.images()) for r in requests)} images) batch_size={runner.batch_size} "
          f"max_new_tokens={max_new} threads={args.threads} settings={args.runner_setting or 'defaults'}")
    run_runner(runner, requests[:8])  # warm-up: first-call allocations, lazy imports
    run_bare(runner.model, processor, requests[:8], runner.batch_size, max_new)
    times: dict[str, list[float]] = {side: [] for side in sides}
    differ: set[str] = set()
    for _ in range(args.pairs):  # one round: every side once, in turn
        answers = {}
        for side, fn in sides.items():
            seconds, answers[side] = timed(fn)
            times[side].append(seconds)
        differ |= {k for side in sides for k in answers["bare"] if answers[side].get(k) != answers["bare"][k]}
    rate = {side: len(requests) / statistics.median(ts) for side, ts in times.items()}
    width = max(map(len, sides))
    for side, ts in times.items():
        print(f"{side:<{width}}: {rate[side]:8.1f} trials/s (median of {len(ts)}; "
              f"{', '.join(f'{t:.2f}' for t in ts)} s)")
    for side in (s for s in sides if s != "bare"):
        ratios = [b / r for r, b in zip(times[side], times["bare"], strict=True)]
        print(f"ratio {side} / bare: {rate[side] / rate['bare']:.2f}x (median of the rounds' ratios "
              f"{statistics.median(ratios):.2f}x; of the fastest runs {min(times['bare']) / min(times[side]):.2f}x, "
              "the least touched by other work on the machine; goal >= 1.2x)")
    print(f"replies differing: {len(differ)} of {len(requests)}" + (f" ({', '.join(sorted(differ)[:6])})"
                                                                    if differ else " (identical on every request)"))
    runner.prefix_reuse = configured_reuse
    runner.forget_images()
    replies = [resp for _, resp in runner.generate(requests)]
    shared = sum(r.provenance.get("shared_prefix_tokens", 0) for r in replies)
    prompt = sum(r.usage["prompt_tokens"] for r in replies)
    print(f"prompt tokens taken from prefixes prefilled once per batch: {shared} of {prompt} "
          f"({100 * shared / prompt:.0f}%)")
    if args.profile:
        profile(sides["runner"] if args.profile == "runner" else side_bare, args.top)


if __name__ == "__main__":
    main()
