"""Training examples for the tiny VLM: the *train* split of every synthetic set, rendered by the real
facet renderers under random orderings, in both answer modes, tokenised exactly as the runner does.

One example = (item, facet, permutation, mode):

- the item comes from the `train` split of a synthetic set (disjoint from the test split the audit
  uses: the loaders drop every train draft equal to a held-out test item);
- the facet is one the set declares (`loader.facets`), the permutation is drawn uniformly from all
  n! orderings of its orderable components (identity included, never favoured);
- the mode is direct (reply ``Answer: X``) or chain-of-thought (a templated one- or two-sentence
  rationale stating the evidence, then ``The answer is (X).``), with the reply strings taken from
  the prompt contract `facets/prompts.py` (`format_answer`);
- the prompt goes through the chat template and the `LlavaProcessor` (``<image>`` expanded to one
  token per patch, pixels normalised), then the reply tokens and ``</s>`` are appended; labels are
  -100 on every prompt token, so the loss falls on the assistant's reply only.

Nothing here looks at the display order to decide the target: the gold is the gold wherever it is
shown, so whatever order sensitivity the model ends up with is learnt, not injected.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any

import torch

from facet_probe.datasets.synthetic.vocab import CATEGORIES
from facet_probe.facets import FACETS
from facet_probe.facets.base import Facet
from facet_probe.facets.prompts import OPTION_LETTERS, format_answer
from facet_probe.items import AnswerType, Component, ComponentKind, Item
from facet_probe.prompts import ImagePart, Prompt, PromptMode

IGNORE_INDEX = -100

def synthetic_sets() -> dict[str, type]:
    """Config name -> loader class of every synthetic set (the package registry)."""
    from facet_probe.datasets.synthetic import SYNTHETIC_SETS

    return dict(SYNTHETIC_SETS)


def loader_class(name: str) -> type:
    return synthetic_sets()[name]


def available_sets() -> list[str]:
    """The nine synthetic sets, in the registry's order."""
    return list(synthetic_sets())


def load_items(name: str, split: str, n: int, seed: int = 42) -> list[Item]:
    """The first `n` items of a synthetic set's split (prefix-stable, as the audit loads them)."""
    return loader_class(name)(name, n=n, seed=seed, split=split).load()


def set_facets(name: str) -> tuple[str, ...]:
    return tuple(loader_class(name).facets)


@cache
def facet(name: str) -> Facet:
    return FACETS[name]()


def generator_version() -> str:
    from facet_probe.datasets.synthetic.base import GENERATOR_VERSION

    return GENERATOR_VERSION


# --- the chat messages the runner builds ----------------------------------------------------------

def prompt_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """The prompt as transformers chat messages (system, then turns; parts in display order).

    Uses the LLaVA runner's own conversion when it is importable, so training sees exactly what the
    runner will send; the fallback builds the same structure (system text first, a ``{"type":
    "image"}`` part at each image slot, text parts verbatim)."""
    runner_messages = _runner_messages()
    if runner_messages is not None:
        return runner_messages(prompt)
    messages: list[dict[str, Any]] = []
    if prompt.system:
        messages.append({"role": "system", "content": [{"type": "text", "text": prompt.system}]})
    for m in prompt.messages:
        messages.append({"role": m.role, "content": [
            {"type": "image"} if isinstance(p, ImagePart) else {"type": "text", "text": p.text}
            for p in m.parts]})
    return messages


@cache
def _runner_messages() -> Callable[[Prompt], list[dict[str, Any]]] | None:
    for module, attr in (("facet_probe.runners.hf.llava", "chat_messages"),
                         ("facet_probe.runners.hf.base", "chat_messages")):
        try:
            return getattr(import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    return None


# --- targets --------------------------------------------------------------------------------------

def answer_of(item: Item, fct: Facet, permutation: Sequence[int]) -> str:
    """The gold answer as the prompt displays it: the displayed letter of the gold option (MCQ), the
    short gold answer (free-form), the gold function name (tools)."""
    if item.answer_type == AnswerType.MCQ:
        order = fct.choice_order(item, permutation)
        return OPTION_LETTERS[list(order).index(item.gold_index)]
    return item.gold_answer or ""


def _a(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def _supporting(item: Item) -> list[Component]:
    return [c for c in item.components if c.metadata.get("supporting")]


def _shape_fact(comp_meta: dict[str, Any], where: str) -> str:
    return f"{where} shows {_a(comp_meta['colour'] + ' ' + comp_meta['shape'])}."


def rationale(item: Item) -> str:
    """A one- or two-sentence reason, templated from the item's own content (its supporting evidence);
    it never mentions display positions."""
    ds = item.dataset
    task = item.metadata.get("task", "")
    gold = item.gold
    if ds.startswith("synthetic_visual_mcq"):
        scene = item.fixed[0].metadata["scene"]
        obj = next(o for o in scene if gold in (o["shape"], o["colour"]))
        return _shape_fact(obj, "The figure")
    if ds.startswith("synthetic_image_set"):
        return _shape_fact(_supporting(item)[0].metadata, "One image")
    if ds.startswith("synthetic_mixed"):
        comp = _supporting(item)[0]
        return comp.text.strip() if comp.kind != ComponentKind.IMAGE else _shape_fact(comp.metadata, "An image")
    if ds.startswith("synthetic_mcq"):
        if task == "category":
            category = re.search(r"Which one is an? (\w+)\?", item.question).group(1)  # type: ignore[union-attr]
            return f"{_a(gold).capitalize()} is {_a(category)}."
        who = re.search(r"What does (\w+) have\?", item.question).group(1)  # type: ignore[union-attr]
        return f"{who} has {_a(gold)}."
    if ds.startswith("synthetic_evidence"):
        facts = [c.text.strip() for c in _supporting(item)]
        # two-hop: the friend link first, then the friend's fact
        facts.sort(key=lambda t: "best friend is" not in t)
        return " ".join(facts)
    if ds.startswith("synthetic_docs"):
        doc = _supporting(item)[0]
        sentences = [s.strip() + "." for s in doc.text.split(".") if s.strip()]
        return next((s for s in sentences if gold in s), sentences[0])
    if ds.startswith("synthetic_dialog"):
        obj = re.search(r"Where is the (\w+)\?", item.question).group(1)  # type: ignore[union-attr]
        return f"The {obj} is in the {gold}."
    if ds.startswith("synthetic_few_shot"):
        query = re.search(r"code word for (\w+)\?", item.question).group(1)  # type: ignore[union-attr]
        demo = re.search(r"code word for (\w+)\?", _supporting(item)[0].text).group(1)  # type: ignore[union-attr]
        category = next((c for c, words in CATEGORIES.items() if query in words), None)
        if category:
            return f"The {query} is {_a(category)}, like the {demo}."
        return f"The {query} goes with the {demo}."
    if ds.startswith("synthetic_tools"):
        tool = _supporting(item)[0]
        text = tool.text.strip()
        return f"The {tool.title} tool {text[:1].lower()}{text[1:]}"
    supporting = _supporting(item)
    if supporting and supporting[0].text.strip():
        return supporting[0].text.strip().split("\n")[0]
    return f"The evidence points to {gold}."


def target_text(item: Item, fct: Facet, permutation: Sequence[int], mode: PromptMode) -> str:
    """The assistant reply to train on, in the instructed form of `mode`."""
    answer = answer_of(item, fct, permutation)
    if PromptMode(mode) == PromptMode.DIRECT:
        return format_answer(mode, answer)
    return format_answer(mode, answer, rationale(item))


# --- tokenisation ---------------------------------------------------------------------------------

@dataclass
class Example:
    """One tokenised training (or evaluation) example."""

    dataset: str
    facet: str
    item_id: str
    mode: str
    permutation: tuple[int, ...]
    input_ids: list[int]
    labels: list[int]
    pixel_values: torch.Tensor | None  # (n_images, 3, H, W) in display order
    prompt_len: int

    def __len__(self) -> int:
        return len(self.input_ids)


def encode_prompt(processor, prompt: Prompt) -> tuple[list[int], torch.Tensor | None]:
    """Prompt token ids and pixel values, exactly as the runner feeds the model."""
    text = processor.apply_chat_template(prompt_messages(prompt), add_generation_prompt=True, tokenize=False)
    images = [ref.to_pil() for ref in prompt.images()]
    enc = processor(text=[text], images=images or None, return_tensors="pt")
    pixels = enc.get("pixel_values") if images else None
    return enc["input_ids"][0].tolist(), pixels


def encode_example(processor, item: Item, facet_name: str, permutation: Sequence[int],
                   mode: PromptMode) -> Example:
    fct = facet(facet_name)
    prompt = fct.render(item, permutation, mode)
    prompt_ids, pixels = encode_prompt(processor, prompt)
    tok = processor.tokenizer
    reply = tok(target_text(item, fct, permutation, mode), add_special_tokens=False)["input_ids"]
    reply = [*reply, tok.eos_token_id]
    return Example(item.dataset, facet_name, item.item_id, str(mode), tuple(permutation),
                   prompt_ids + reply, [IGNORE_INDEX] * len(prompt_ids) + reply, pixels, len(prompt_ids))


def random_permutation(rng: random.Random, n: int) -> tuple[int, ...]:
    perm = list(range(n))
    rng.shuffle(perm)
    return tuple(perm)


def orderable_count(fct: Facet, item: Item) -> int:
    return len(fct.orderables(item))


@dataclass
class Pool:
    """The train items of every set, with the facets each can be rendered under."""

    items: dict[str, list[Item]]
    facets: dict[str, tuple[str, ...]]

    @classmethod
    def load(cls, sets: Sequence[str], n_per_set: int, seed: int = 42, split: str = "train") -> Pool:
        items = {s: load_items(s, split, n_per_set, seed) for s in sets}
        facets = {s: tuple(f for f in set_facets(s) if f in FACETS) for s in sets}
        return cls(items, facets)


def sample_spec(rng: random.Random, pool: Pool, weights: dict[str, float],
                p_cot: float) -> tuple[Item, str, tuple[int, ...], PromptMode]:
    """Draw (item, facet, permutation, mode): set by weight, item and facet uniformly, permutation
    uniformly among all orderings, mode by `p_cot`."""
    names = list(weights)
    name = rng.choices(names, weights=[weights[n] for n in names])[0]
    item = rng.choice(pool.items[name])
    supported = [f for f in pool.facets[name] if facet(f).unsupported_reason(item) is None]
    facet_name = rng.choice(supported)
    perm = random_permutation(rng, orderable_count(facet(facet_name), item))
    mode = PromptMode.COT if rng.random() < p_cot else PromptMode.DIRECT
    return item, facet_name, perm, mode


def example_stream(processor, pool: Pool, weights: dict[str, float], seed: int,
                   p_cot: float = 0.5) -> Iterator[Example]:
    """An endless, seeded stream of tokenised examples."""
    rng = random.Random(seed)
    while True:
        item, facet_name, perm, mode = sample_spec(rng, pool, weights, p_cot)
        yield encode_example(processor, item, facet_name, perm, mode)


def collate(examples: Sequence[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch (training); pixel values of all examples concatenated in order."""
    width = max(len(e) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, e in enumerate(examples):
        ids[i, : len(e)] = torch.tensor(e.input_ids)
        labels[i, : len(e)] = torch.tensor(e.labels)
        mask[i, : len(e)] = 1
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    pixels = [e.pixel_values for e in examples if e.pixel_values is not None]
    if pixels:
        batch["pixel_values"] = torch.cat(pixels)
    return batch


def tokenizer_corpus(pool: Pool, seed: int, per_set: int = 400) -> Iterator[str]:
    """Texts to train the tokenizer on: rendered prompts and replies of the train split (both
    modes, random orderings), plus the chat roles."""
    rng = random.Random(seed)
    for name, items in pool.items.items():
        for item in items[:per_set]:
            supported = [f for f in pool.facets[name] if facet(f).unsupported_reason(item) is None]
            for facet_name in supported:
                fct = facet(facet_name)
                perm = random_permutation(rng, orderable_count(fct, item))
                for mode in PromptMode:
                    prompt = fct.render(item, perm, mode)
                    yield prompt.system
                    for m in prompt.messages:
                        yield m.text()
                    yield target_text(item, fct, perm, mode)


__all__ = [
    "IGNORE_INDEX", "Example", "Pool", "answer_of", "available_sets", "collate",
    "encode_example", "encode_prompt", "example_stream", "generator_version", "load_items",
    "prompt_messages", "rationale", "sample_spec", "target_text", "tokenizer_corpus",
]
