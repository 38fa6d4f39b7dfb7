"""How far a saved tiny VLM is from answering a CoT prompt first: the CE of the stop-reasoning template.

For the first `n` test items of `synthetic_visual_mcq`, rendered as the attack renders them (options in
source order, CoT prompt, the clean picture), the template ``The answer is (`` is teacher-forced at the
start of the reply. The figure that decides whether the stop-reasoning attack can work is the CE of
`` answer`` after ``The`` (every CoT reply of this model starts with ``The``): about 19 nats on a model
that never saw a CoT prompt answered first (docs/tiny_vlm.md, answer-first experiment).

``python -m facet_probe_dev.tiny_vlm.answer_first [--path DIR] [--n 50]`` prints the figures as JSON.
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
from facet_probe_dev.tiny_vlm.data import encode_prompt, facet, load_items

SET = "synthetic_visual_mcq"


def template_prefix() -> str:
    """``The answer is (``: the CoT answer sentence up to its letter slot (what the attack forces)."""
    return COT_ANSWER_TEMPLATE.split("{answer}")[0]


@torch.no_grad()
def template_ce(model, processor, n: int = 50) -> dict[str, float]:
    """Mean CE (nats) of each template token at the reply's start, the CE of the token after the first,
    and the share of items whose most likely second token is the template's (`` answer``)."""
    tok = processor.tokenizer
    template = tok(template_prefix(), add_special_tokens=False)["input_ids"]
    fct = facet("option_order")
    per_token, second_top = [], 0
    for item in load_items(SET, "test", n):
        prompt = fct.render(item, list(range(len(item.choices))), PromptMode.COT)
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


def main(argv: Sequence[str] | None = None) -> None:
    from transformers import LlavaForConditionalGeneration, LlavaProcessor

    from facet_probe.config.schema import asset_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default=asset_path("tiny_vlm"))
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = LlavaForConditionalGeneration.from_pretrained(args.path, dtype=torch.float32).eval()
    processor = LlavaProcessor.from_pretrained(args.path)
    print(json.dumps({"path": str(args.path), **template_ce(model, processor, args.n)}))


if __name__ == "__main__":
    main()
