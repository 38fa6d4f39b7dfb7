"""Accuracy and parse rate of the tiny VLM per synthetic dataset, direct and chain-of-thought.

Items are the first `n` of each set's *test* split (what the audit samples); each item is asked
under `k` orderings drawn with the audit's own grammar (`core.permutations.sample_permutations`, seed 42,
identity first), rendered by the set's first (audit) facet, and scored by the project's scorer.

Two ways to get the replies:

- ``backend="runner"`` (default from the command line): the real `LlavaRunner` loading the saved
  folder, exactly as ``python -m facet_probe model=tiny_vlm`` does;
- ``backend="direct"``: greedy `generate` on an in-memory model with the same processor and chat
  template (used for the quick evaluations during training, before anything is saved).

``python -m facet_probe_dev.tiny_vlm.evaluate [--path DIR] [--n 50] [--k 2] [--backend runner|direct]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from facet_probe.core.permutations import sample_permutations
from facet_probe.core.prompts import Prompt, PromptMode
from facet_probe.scoring.score import score
from facet_probe.store.atomic import atomic_write_text
from facet_probe_dev.tiny_vlm.data import available_sets, encode_prompt, facet, load_items, set_facets


@dataclass
class SetResult:
    dataset: str
    facet: str
    mode: str
    n_items: int
    n_trials: int
    accuracy: float
    parse_rate: float


@dataclass(frozen=True)
class Case:
    dataset: str
    facet: str
    item: object
    permutation: tuple[int, ...]
    prompt: Prompt


def build_cases(sets: Sequence[str], n: int, k: int, mode: PromptMode, seed: int = 42,
                offset: int = 0) -> list[Case]:
    """Items `offset..offset+n` of each set's test split, `k` audit orderings each."""
    cases = []
    for name in sets:
        fct_name = set_facets(name)[0]
        fct = facet(fct_name)
        for item in load_items(name, "test", offset + n, seed)[offset:]:
            count = len(fct.orderables(item))
            for perm in sample_permutations(count, k, seed, item.item_id):
                cases.append(Case(name, fct_name, item, tuple(perm), fct.render(item, perm, mode)))
    return cases


@torch.no_grad()
def generate_direct(model, processor, prompts: Sequence[Prompt], max_new_tokens: int = 48,
                    batch_size: int = 16) -> list[str]:
    """Greedy replies from an in-memory model (left-padded batches, grouped by length)."""
    tok = processor.tokenizer
    encoded = [encode_prompt(processor, p) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i][0]))
    out: list[str] = [""] * len(prompts)
    model.eval()
    for start in range(0, len(order), batch_size):
        idx = order[start: start + batch_size]
        width = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((len(idx), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            seq = encoded[i][0]
            ids[row, width - len(seq):] = torch.tensor(seq)
            mask[row, width - len(seq):] = 1
        pixels = [encoded[i][1] for i in idx if encoded[i][1] is not None]
        kwargs = {"pixel_values": torch.cat(pixels)} if pixels else {}
        gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                             **kwargs)
        for row, i in enumerate(idx):
            out[i] = tok.decode(gen[row, width:], skip_special_tokens=True).strip()
    return out


def generate_runner(path: str, prompts: Sequence[Prompt], max_new_tokens: int = 48) -> list[str]:
    """Replies from the real `LlavaRunner` loading the saved folder."""
    from facet_probe.runners.base import Request
    from facet_probe.runners.hf.llava import LlavaRunner

    runner = LlavaRunner(**runner_kwargs(path, max_new_tokens))
    try:
        runner.check_ready()
        reqs = [Request(key=str(i), prompt=p) for i, p in enumerate(prompts)]
        texts = {}
        for req, resp in runner.generate(reqs):
            if resp.error:
                raise RuntimeError(f"runner error on request {req.key}: {resp.error}")
            texts[req.key] = resp.text
    finally:
        runner.close()
    return [texts[str(i)] for i in range(len(prompts))]


def runner_kwargs(path: str, max_new_tokens: int) -> dict:
    """The kwargs of conf/model/tiny_vlm.yaml, with the folder and the reply budget given."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    conf = OmegaConf.load(str(files("facet_probe.conf").joinpath("model/tiny_vlm.yaml")))
    conf.local_path = path
    kwargs = OmegaConf.to_container(conf, resolve=False)
    kwargs.pop("_target_", None)
    kwargs.setdefault("generation", {})["max_new_tokens"] = max_new_tokens
    return kwargs


def evaluate(sets: Sequence[str], n: int, k: int, modes: Sequence[PromptMode], *, model=None, processor=None,
             path: str | None = None, backend: str = "direct", seed: int = 42, offset: int = 0,
             max_new_tokens: int = 48, cases: dict[str, list[Case]] | None = None,
             replies: dict[str, list[str]] | None = None) -> list[SetResult]:
    """Accuracy and parse rate per (set, mode); `cases` (mode -> cases) may be prebuilt; `replies`, if
    given, receives the generated texts per mode (in case order)."""
    results = []
    for mode in modes:
        mode_cases = (cases or {}).get(str(mode)) or build_cases(sets, n, k, PromptMode(mode), seed, offset)
        prompts = [c.prompt for c in mode_cases]
        if backend == "runner":
            texts = generate_runner(path, prompts, max_new_tokens)  # type: ignore[arg-type]
        else:
            texts = generate_direct(model, processor, prompts, max_new_tokens)
        if replies is not None:
            replies[str(mode)] = list(texts)
        for name in sets:
            rows = [(c, t) for c, t in zip(mode_cases, texts, strict=True) if c.dataset == name]
            scores = [score(c.item, facet(c.facet), c.permutation, c.prompt, t) for c, t in rows]
            results.append(SetResult(
                name, rows[0][0].facet, str(mode), n, len(rows),
                sum(s.correct for s in scores) / len(rows),
                sum(s.parse_status != "parse_error" for s in scores) / len(rows)))
    return results


def format_table(results: Sequence[SetResult]) -> str:
    """A markdown table: one row per dataset, accuracy / parse rate for each mode."""
    modes = list(dict.fromkeys(r.mode for r in results))
    by = {(r.dataset, r.mode): r for r in results}
    head = "| dataset | facet | " + " | ".join(f"{m} accuracy | {m} parse rate" for m in modes) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(modes))]
    for name in dict.fromkeys(r.dataset for r in results):
        cells = []
        for m in modes:
            r = by[(name, m)]
            cells += [f"{r.accuracy:.3f}", f"{r.parse_rate:.3f}"]
        lines.append(f"| {name} | {by[(name, modes[0])].facet} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from facet_probe.config.schema import asset_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default=asset_path("tiny_vlm"))
    ap.add_argument("--n", type=int, default=50, help="test items per set")
    ap.add_argument("--k", type=int, default=2, help="audit orderings per item")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--sets", nargs="*", default=None)
    ap.add_argument("--backend", choices=("runner", "direct"), default="runner")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    sets = args.sets or available_sets()
    model = processor = None
    if args.backend == "direct":
        from transformers import LlavaForConditionalGeneration, LlavaProcessor

        model = LlavaForConditionalGeneration.from_pretrained(args.path, dtype=torch.float32)
        processor = LlavaProcessor.from_pretrained(args.path)
    t0 = time.perf_counter()
    results = evaluate(sets, args.n, args.k, [PromptMode.DIRECT, PromptMode.COT], model=model,
                       processor=processor, path=args.path, backend=args.backend, offset=args.offset)
    print(format_table(results))
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        atomic_write_text(args.json, json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
