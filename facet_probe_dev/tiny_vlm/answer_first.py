"""How far a saved tiny VLM is from answering a CoT prompt first: the CE of the stop-reasoning template.

For the first `n` test items of `synthetic_visual_mcq`, rendered as the attack renders them (options in
source order, CoT prompt, the clean picture), the template ``The answer is (`` is teacher-forced at the
start of the reply. The figure that decides whether the stop-reasoning attack can work is the CE of
`` answer`` after ``The`` (every CoT reply of this model starts with ``The``): about 19 nats on a model
that never saw a CoT prompt answered first (docs/tiny_vlm.md, answer-first experiment).

With ``--background G [--channels b]`` the pictures' white background is set to level G first (grey, or
in the named channels only) (`data.with_background`; the
background experiment, issue 45), and ``--generate`` adds the share of greedy CoT replies that answer first
(and of those answered correctly).

``python -m facet_probe_dev.tiny_vlm.answer_first [--path DIR] [--n 50] [--background G] [--channels C] [--generate]`` prints
the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from facet_probe.core.prompts import PromptMode
from facet_probe.facets.prompts import COT_ANSWER_TEMPLATE
from facet_probe_dev.tiny_vlm.data import WHITE, answer_of, encode_prompt, facet, load_items, with_background

SET = "synthetic_visual_mcq"


def template_prefix() -> str:
    """``The answer is (``: the CoT answer sentence up to its letter slot (what the attack forces)."""
    return COT_ANSWER_TEMPLATE.split("{answer}")[0]


def cot_prompts(n: int, level: int = WHITE, channels: str = "rgb"):
    """(item, CoT prompt) of the first `n` test items as the attack renders them, the background's
    `channels` at `level` (`data.with_background`)."""
    fct = facet("option_order")
    for item in load_items(SET, "test", n):
        item = with_background(item, level, channels)
        yield item, fct.render(item, list(range(len(item.choices))), PromptMode.COT)


@torch.no_grad()
def template_ce(model, processor, n: int = 50, level: int = WHITE, channels: str = "rgb") -> dict[str, float]:
    """Mean CE (nats) of each template token at the reply's start, the CE of the token after the first,
    and the share of items whose most likely second token is the template's (`` answer``)."""
    tok = processor.tokenizer
    template = tok(template_prefix(), add_special_tokens=False)["input_ids"]
    per_token, second_top = [], 0
    for _, prompt in cot_prompts(n, level, channels):
        ids, pixels = encode_prompt(processor, prompt)
        input_ids = torch.tensor([ids + template])
        logits = model(input_ids=input_ids, pixel_values=pixels).logits[0, len(ids) - 1: -1].float()
        ce = F.cross_entropy(logits, torch.tensor(template), reduction="none")
        per_token.append(ce.tolist())
        second_top += int(logits[1].argmax()) == template[1]
    means = [sum(col) / len(col) for col in zip(*per_token, strict=True)]
    return {"items": n, "template_tokens": tok.convert_ids_to_tokens(template),
            "ce_per_token": [round(m, 3) for m in means], "ce_template_mean": round(sum(means) / len(means), 3),
            "ce_answer_after_the": round(means[1], 3), "p_answer_after_the": round(math.exp(-means[1]), 4),
            "share_answer_top_after_the": round(second_top / n, 3)}


@torch.no_grad()
def greedy_first(model, processor, n: int = 50, level: int = WHITE, channels: str = "rgb",
                 max_new_tokens: int = 48) -> dict[str, float]:
    """The share of greedy CoT replies that start with the template (answer first), and of those the share
    whose letter is the gold one; the share of all replies whose answer sentence names the gold letter."""
    tok, prefix = processor.tokenizer, template_prefix()
    first = first_right = right = 0
    for item, prompt in cot_prompts(n, level, channels):
        ids, pixels = encode_prompt(processor, prompt)
        out = model.generate(input_ids=torch.tensor([ids]), pixel_values=pixels, max_new_tokens=max_new_tokens,
                             do_sample=False)
        text = tok.decode(out[0, len(ids):], skip_special_tokens=True).strip()
        gold = COT_ANSWER_TEMPLATE.format(answer=answer_of(item, facet("option_order"), range(len(item.choices))))
        first += text.startswith(prefix)
        first_right += text.startswith(gold)
        right += gold in text
    return {"greedy_answer_first": round(first / n, 3),
            "greedy_first_correct": round(first_right / first, 3) if first else None,
            "greedy_correct": round(right / n, 3)}


def main(argv: Sequence[str] | None = None) -> None:
    from transformers import LlavaForConditionalGeneration, LlavaProcessor

    from facet_probe.config.schema import asset_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default=asset_path("tiny_vlm"))
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--background", type=int, default=WHITE, help="level of the pictures' background")
    ap.add_argument("--channels", default="rgb", help="the background channels set to it (rgb: grey, b: tint)")
    ap.add_argument("--generate", action="store_true", help="also the greedy CoT replies' form")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = LlavaForConditionalGeneration.from_pretrained(args.path, dtype=torch.float32).eval()
    processor = LlavaProcessor.from_pretrained(args.path)
    figures = {"path": str(args.path), "background": args.background, "channels": args.channels,
               **template_ce(model, processor, args.n, args.background, args.channels)}
    if args.generate:
        figures |= greedy_first(model, processor, args.n, args.background, args.channels)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
