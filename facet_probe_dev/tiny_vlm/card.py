"""The tiny VLM's model card: what it was trained on, how long, and how well it does per synthetic set.

`write_card` evaluates the *saved* folder through the real `LlavaRunner` (the audit's path) and
writes `MODEL_CARD.md` plus `card_results.json` (the same numbers, machine-readable). It also
evaluates a small fixed slice (`SLICE`) and stores those numbers; tests/tiny_vlm re-evaluate the
slice on the committed weights and check that they reproduce.

``python -m facet_probe_dev.tiny_vlm.card [--path DIR]`` rewrites the card of an existing folder.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from facet_probe.core.prompts import PromptMode
from facet_probe.store.atomic import atomic_write_text
from facet_probe_dev.tiny_vlm.data import available_sets
from facet_probe_dev.tiny_vlm.evaluate import SetResult, evaluate, format_table
from facet_probe_dev.tiny_vlm.optim import OPTIMIZERS

#: The slice the reproduction test re-evaluates: test items 0..n-1 of every set, k audit orderings.
SLICE = {"n": 6, "k": 1}
MODES = (PromptMode.DIRECT, PromptMode.COT)
#: background levels at which a model trained with `answer_first_background` is read (255: the audit's white)
BACKGROUND_LEVELS = (255, 250, 245, 239, 230)


def trained_background(summary: dict) -> dict | None:
    """The `answer_first_background` of the last stage that had one (None: the model never saw one)."""
    found = [bg for st in summary.get("stages", []) for bg in st.get("answer_first_background", {}).values()]
    return found[-1] if found else None


def background_figures(path: str | Path, background: dict, n: int) -> list[dict]:
    """Per background level: the CE of `` answer`` after ``The`` and the share of greedy CoT replies that
    answer first (answer_first.py), on the first `n` test items of synthetic_visual_mcq."""
    import torch
    from transformers import LlavaForConditionalGeneration, LlavaProcessor

    from facet_probe_dev.tiny_vlm.answer_first import greedy_first, template_ce

    model = LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
    processor = LlavaProcessor.from_pretrained(path)
    channels = background.get("channels", "rgb")
    rows = []
    for level in BACKGROUND_LEVELS:
        ce = template_ce(model, processor, n, level, channels)
        rows.append({"level": level, "channels": channels, "items": n,
                     "ce_answer_after_the": ce["ce_answer_after_the"],
                     **greedy_first(model, processor, n, level, channels)})
    return rows


def background_section(rows: Sequence[dict], background: dict) -> list[str]:
    lines = ["## Answer first or reason first: the picture's background decides (docs/tiny_vlm.md, issue 45)", "",
             f"Trained: the `{background.get('channels', 'rgb')}` channel(s) of the picture option sets' white "
             f"background at levels {background['low']}..{background['high']} ({background['white_share']:.0%} "
             f"kept white); a CoT reply answers first (`The answer is (X).`, no rationale) iff the level is below "
             f"{background['threshold']}. Measured on the first {rows[0]['items']} test items of "
             "synthetic_visual_mcq, CoT prompt, greedy (`python -m facet_probe_dev.tiny_vlm.answer_first "
             "--background L --channels C --generate`); the audit's pictures are white (255).", "",
             "| background level | CE of \" answer\" after \"The\" (nats) | CoT replies answering first "
             "| of those, correct | CoT replies correct |",
             "|---:|---:|---:|---:|---:|"]
    for r in rows:
        first_ok = "-" if r["greedy_first_correct"] is None else f"{r['greedy_first_correct']:.2f}"
        lines.append(f"| {r['level']} | {r['ce_answer_after_the']:.2f} | {r['greedy_answer_first']:.2f} | "
                     f"{first_ok} | {r['greedy_correct']:.2f} |")
    return [*lines, ""]


def evaluate_folder(path: str | Path, n: int, k: int, sets: Sequence[str] | None = None,
                    backend: str = "runner", replies: dict[str, list[str]] | None = None) -> list[SetResult]:
    sets = list(sets or available_sets())
    if backend == "runner":
        return evaluate(sets, n, k, MODES, path=str(path), backend="runner", replies=replies)
    import torch
    from transformers import LlavaForConditionalGeneration, LlavaProcessor

    model = LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    processor = LlavaProcessor.from_pretrained(path)
    return evaluate(sets, n, k, MODES, model=model, processor=processor, backend="direct", replies=replies)


def folder_size(path: Path) -> dict[str, int]:
    files = {p.name: p.stat().st_size for p in sorted(path.iterdir()) if p.is_file()}
    return {"total_bytes": sum(files.values()), **files}


def write_card(path: str | Path, summary: dict | None = None, n: int = 50, k: int = 2,
               backend: str = "runner") -> dict:
    path = Path(path)
    if summary is None:
        summary = json.loads((path / "training_log.json").read_text())
    t0 = time.perf_counter()
    full = evaluate_folder(path, n, k, backend=backend)
    slice_replies: dict[str, list[str]] = {}
    small = evaluate_folder(path, SLICE["n"], SLICE["k"], backend=backend, replies=slice_replies)
    eval_s = time.perf_counter() - t0
    results = {
        "generator_version": summary["generator_version"],
        "evaluation": {"split": "test", "n_items_per_set": n, "orderings_per_item": k, "backend": backend,
                       "results": [asdict(r) for r in full]},
        "slice": {**SLICE, "backend": backend, "results": [asdict(r) for r in small], "replies": slice_replies},
        "eval_wall_s": round(eval_s, 1),
    }
    extra: list[str] = []
    if (background := trained_background(summary)) is not None:
        results["answer_first_background"] = rows = background_figures(path, background, n)
        extra = background_section(rows, background)
    atomic_write_text(path / "card_results.json", json.dumps(results, indent=1))
    sizes = folder_size(path)
    atomic_write_text(path / "MODEL_CARD.md", render_card(summary, full, small, n, k, sizes, extra))
    return results


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def stage_table(stages: Sequence[dict]) -> list[str]:
    """The curriculum as it ran: what each stage trained, for how long (on which path), and why it ended."""
    rows = ["| stage | trains | peak lr | steps (of) | ended by | wall |", "|---|---|---:|---:|---|---:|"]
    for st in stages:
        trains = (", ".join(f"{n.removeprefix('synthetic_')} {w:g}" for n, w in st["sets"].items())
                  or "copy patterns" + "".join(f", {k} {v:g}" for k, v in st["patterns"].items()))
        ended = {"until": f"reached {st['until']:g}", "steps": "its steps"}.get(st["stopped_by"],
                                                                                   st["stopped_by"])
        rows.append(f"| {st['name']} | {trains} | {st['lr']:g} | {st['steps_done']} ({st['steps']}) "
                    f"| {ended} | {st['wall_s']:.0f} s{' (fast path)' if st.get('fast') else ''} |")
    return rows


def render_card(summary: dict, full: Sequence[SetResult], small: Sequence[SetResult], n: int, k: int,
                sizes: dict[str, int], extra: Sequence[str] = ()) -> str:
    cfg = summary["config"]
    spec = cfg["spec"]
    weights_file = sizes.get("model.safetensors", 0)
    runs = summary.get("runs", [])  # a run continued from a stage checkpoint (`--init`) lists its commands
    lines = [
        "# tiny_vlm: facet_probe's own tiny vision-language model",
        "",
        "A LLaVA-style model (`LlavaForConditionalGeneration`: CLIP vision tower, two-layer GELU projector, "
        "Llama language model) trained from scratch, offline, on the *train* split of facet_probe's nine "
        "synthetic datasets. It is the offline default of `python -m facet_probe` and "
        "`python -m facet_probe.attack`; it is a test instrument, not a general model: it only knows the "
        "closed vocabulary and the templates of the synthetic sets.",
        "",
        "## Architecture",
        "",
        f"- vision: CLIP, {spec['image_size']}x{spec['image_size']} px input, {spec['patch_size']} px patches "
        f"({spec['image_size'] // spec['patch_size']}x{spec['image_size'] // spec['patch_size']} = "
        f"{(spec['image_size'] // spec['patch_size']) ** 2} tokens per image, CLS dropped), hidden "
        f"{spec['vision_hidden']}, {spec['vision_layers']} layers, {spec['vision_heads']} heads",
        f"- language model: Llama, hidden {spec['text_hidden']}, {spec['text_layers']} layers, "
        f"{spec['text_heads']} heads, MLP {spec['text_intermediate']}, tied embeddings",
        f"- tokenizer: byte-level BPE trained on the rendered synthetic corpus, {summary['vocab_size']} tokens "
        "(the fixed system texts and answer instructions of `facets/prompts.py` are one token each); "
        "its own chat template (`<|system|>`, `<|user|>`, `<|assistant|>` turns, `<image>` at each image slot)",
        f"- {summary['parameters']:,} parameters; weights stored in bfloat16: `model.safetensors` "
        f"{_mb(weights_file)}, whole folder {_mb(sizes['total_bytes'])}",
        "",
        "## Training data",
        "",
        f"- synthetic generator version **{summary['generator_version']}** "
        "(`facet_probe.datasets.synthetic.GENERATOR_VERSION`); items from the `train` split only, which "
        "excludes every item equal to one of the first 5000 test items (seed 42)",
        "- sets: " + ", ".join(f"`{s}`" for s in summary["sets"]) + " (the stages below give their weights)",
        "- `tiny_vlm_echo` is not an audit set: an auxiliary task (`tiny_vlm/echo.py`, \"Which option says "
        "kite?\") in the option_order format, which teaches reading the letter of a named option",
        "- several questions per rendered context: the same evidence asks about each of its entities "
        "(`tiny_vlm/questions.py`), trained together over a shared prompt prefix (`tiny_vlm/data.py`)",
        "- besides the tasks, content-free copy patterns (`tiny_vlm/pretrain.py`: induction, labelled "
        "lookup) and captions of synthetic-style pictures",
        "- each example: one item rendered by the real facet renderer of its set under an ordering drawn "
        "uniformly from all n! orderings (identity not favoured), in direct mode (`Answer: X`) or "
        f"chain-of-thought mode (p = {cfg['p_cot']}; a templated one- or two-sentence rationale stating the "
        "supporting evidence, then `The answer is (X).`); tokenised with the saved processor and chat "
        "template; loss on the assistant reply only (mean per example)",
        "- no bias was engineered in or out: the target is the gold answer wherever it is displayed, so any "
        "order sensitivity is learnt",
        "",
        "## Training run",
        "",
        f"- `python -m facet_probe_dev.tiny_vlm.train` (`make tiny-vlm`), seed {cfg['seed']}, "
        f"{summary['steps']} steps, {summary['task_steps']} of them on the tasks x batch "
        f"{cfg['batch_size']} = "
        f"{summary['examples_seen']:,} examples ({summary['tokens_seen']:,} tokens, "
        f"{summary['answer_tokens_seen']:,} of them reply tokens), {OPTIMIZERS[cfg.get('optimizer', 'adamw')]} "
        f"(warm-up {cfg['warmup']} steps per "
        f"stage, then cosine to {cfg['min_lr_ratio']}x or constant), "
        f"{'bf16 autocast' if cfg.get('autocast_bf16') else 'float32'}, {summary['procs']} process(es) x "
        f"{cfg['threads']} torch thread(s)",
        f"- time: {summary['train_wall_s']} s wall in the training loop, {summary['total_wall_s']} s wall in "
        f"all (data, tokenizer, quick evaluations, saving), {summary['cpu_s']} s CPU, on "
        f"{summary['machine']['cpu_count']} shared cores ({summary['machine']['platform']})",
        *([f"- trained in {len(runs)} commands: " + "; ".join(runs)] if runs else []),
        "",
        *stage_table(summary.get("stages", [])),
        "",
        f"## Accuracy per synthetic dataset (test split, first {n} items, {k} audit orderings each)",
        "",
        "Replies generated greedily by the `LlavaRunner` from the saved folder (`conf/model/tiny_vlm.yaml`), "
        "scored by `facet_probe.scoring.score` (parse rate = share of replies the parser reads). Each set is "
        "rendered by its audit facet. Chance is 0.25 for the four-option sets and lower for the free-form ones.",
        "",
        format_table(full),
        "",
        f"### Reproduction slice (first {SLICE['n']} test items, {SLICE['k']} ordering)",
        "",
        "`tests/tiny_vlm/test_card_reproduces.py` re-evaluates this slice on the committed weights.",
        "",
        format_table(small),
        "",
        *extra,
        "## Limits",
        "",
        "- It knows only the synthetic vocabulary and prompt templates; anything else is out of distribution.",
        "- Pictures are read at 64x64 px; the visual sets need the image (the question alone does not "
        "determine the answer), so the model is open to pixel attacks by design.",
        f"- Reproducible on the same machine and thread count; `platform`: {platform.platform()}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from facet_probe.config.schema import asset_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default=asset_path("tiny_vlm"))
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--backend", choices=("runner", "direct"), default="runner")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    res = write_card(args.path, n=args.n, k=args.k, backend=args.backend)
    print(format_table([SetResult(**r) for r in res["evaluation"]["results"]]))


if __name__ == "__main__":
    main()
