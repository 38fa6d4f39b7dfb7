"""Training examples for the tiny VLM: the *train* split of every synthetic set, rendered by the real
facet renderers under random orderings, in both answer modes, tokenised exactly as the runner does.

One training *prompt* = (item, facet, permutation, mode):

- the item comes from the `train` split of a synthetic set (disjoint from the test split the audit
  uses: the loaders drop every train draft equal to a held-out test item);
- the facet is one the set declares (`loader.facets`); the permutation is drawn uniformly from all
  n! orderings of its orderable components (identity included, never favoured);
- the mode is direct (reply ``Answer: X``) or chain-of-thought (a templated one- or two-sentence
  rationale stating the supporting evidence, then ``The answer is (X).``), the reply strings coming
  from the prompt contract `facets/prompts.py` (`format_answer`);
- the prompt goes through the LLaVA runner's chat messages, the model's chat template and the
  `LlavaProcessor` (``<image>`` expanded to one token per patch, pixels normalised); the reply tokens
  and ``</s>`` follow; labels are -100 on every prompt token: the loss is on the assistant reply only.

Shared prefixes. A synthetic item's evidence answers several questions (`questions.py`: "What is Ana's
job?", "What is Ben's job?" over the same documents), and every facet renders the question, the
options and the answer instruction *last*. So a `Packed` example renders several sibling items of
one item under one ordering (each with its own mode, and, for option_order, its own option order),
keeps the token prefix they share once, and appends each sibling's own suffix (rest of the prompt +
reply) as a branch that sees the prefix and itself only (a block attention mask; positions restart
after the prefix). Each branch is token for token the rendered prompt of its sibling, so this is
exactly training on those prompts one by one, at a fraction of the compute.

Nothing here looks at the display order to decide the target: the gold is the gold wherever it is
shown, so whatever order sensitivity the model ends up with is learnt, not injected.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import torch
from PIL import Image

from facet_probe.core.items import AnswerType, ImageRef, Item
from facet_probe.core.prompts import Prompt, PromptMode
from facet_probe.facets import FACETS
from facet_probe.facets.base import Facet
from facet_probe.facets.prompts import OPTION_LETTERS, format_answer
from facet_probe.runners.hf.base import chat_messages
from facet_probe_dev.tiny_vlm import echo, same_colour
from facet_probe_dev.tiny_vlm.questions import questions, rationale, sibling

IGNORE_INDEX = -100


# --- the synthetic sets ---------------------------------------------------------------------------

def synthetic_sets() -> dict[str, type]:
    """Config name -> loader class of every synthetic set (the package registry)."""
    from facet_probe.datasets.synthetic import SYNTHETIC_SETS

    return dict(SYNTHETIC_SETS)


def available_sets() -> list[str]:
    """The nine synthetic sets, in the registry's order."""
    return list(synthetic_sets())


#: the tiny VLM's own training tasks (not audit sets): name -> (facets, items(n, seed, split))
AUXILIARY_TASKS = {
    echo.NAME: (echo.FACETS, lambda n, seed, split: echo.echo_items(n, seed)),
    same_colour.NAME: (same_colour.FACETS, same_colour.same_colour_items),
    same_colour.OWNER_NAME: (same_colour.FACETS, same_colour.owner_items),
}


def load_items(name: str, split: str, n: int, seed: int = 42) -> list[Item]:
    """The first `n` items of a synthetic set's split (prefix-stable, as the audit loads them), or of
    an auxiliary task (`AUXILIARY_TASKS`; echo has a train split only)."""
    if name in AUXILIARY_TASKS:
        return AUXILIARY_TASKS[name][1](n, seed, split)
    return synthetic_sets()[name](name, n=n, seed=seed, split=split).load()


def set_facets(name: str) -> tuple[str, ...]:
    """The facets a set supports (its first is the one the audit uses)."""
    declared = AUXILIARY_TASKS[name][0] if name in AUXILIARY_TASKS else synthetic_sets()[name].facets
    return tuple(f for f in declared if f in FACETS)


@cache
def facet(name: str) -> Facet:
    return FACETS[name]()


def generator_version() -> str:
    from facet_probe.datasets.synthetic.base import GENERATOR_VERSION

    return GENERATOR_VERSION


# --- targets --------------------------------------------------------------------------------------

def answer_of(item: Item, fct: Facet, permutation: Sequence[int]) -> str:
    """The gold answer as the prompt displays it: the displayed letter of the gold option (MCQ), the
    short gold answer (free-form), the gold function name (tools)."""
    if item.answer_type == AnswerType.MCQ:
        order = fct.choice_order(item, permutation)
        return OPTION_LETTERS[list(order).index(item.gold_index)]
    return item.gold_answer or ""


def target_text(item: Item, fct: Facet, permutation: Sequence[int], mode: PromptMode,
                answer_first: bool = False) -> str:
    """The assistant reply to train on, in the instructed form of `mode`; with `answer_first`, a CoT reply
    that answers at once in the CoT template (``The answer is (X).``, no rationale): the form the
    stop-reasoning attack pushes a CoT model to (docs/tiny_vlm.md, answer-first experiment)."""
    answer = answer_of(item, fct, permutation)
    if PromptMode(mode) == PromptMode.DIRECT or answer_first:
        return format_answer(mode, answer)
    return format_answer(mode, answer, rationale(item))


# --- the background experiment (issue 45) ---------------------------------------------------------

WHITE = 255  # the synthetic pictures' background (datasets/synthetic/draw.py: exactly (255, 255, 255))


@dataclass  # not frozen: OmegaConf merges a stage's YAML into it (curriculum.parse)
class Background:
    """`Stage.answer_first_background` of one set: each example's pictures get their white background's
    `channels` set to a level drawn from `low..high` (integer levels; left exactly white with probability
    `white_share`), and its CoT replies answer first iff the level is below `threshold` (docs/tiny_vlm.md,
    the background experiment). `channels` "rgb" is a grey, "b" a yellowish tint (blue lowered)."""

    low: int = 230
    high: int = 255
    threshold: int = 245
    white_share: float = 0.0
    channels: str = "rgb"

    def draw(self, rng: random.Random) -> int:
        return WHITE if rng.random() < self.white_share else rng.randint(self.low, self.high)

    def answers_first(self, level: int) -> bool:
        return level < self.threshold


def tint_background(png: bytes, level: int, channels: str = "rgb") -> bytes:
    """The picture with `channels` of its background (the pixels exactly white) set to `level`; every other
    pixel and channel unchanged. Level 255 leaves the bytes as they were."""
    if level == WHITE:
        return png
    with Image.open(io.BytesIO(png)) as img:
        pixels = np.array(img.convert("RGB"))
    white = (pixels == WHITE).all(axis=-1)
    for c in sorted({"rgb".index(ch) for ch in channels}):
        pixels[..., c][white] = level
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def with_background(item: Item, level: int, channels: str = "rgb") -> Item:
    """`item` with every picture's background tinted (`tint_background`)."""
    if level == WHITE:
        return item

    def repaint(comps):
        return tuple(c if c.image is None else c.model_copy(
            update={"image": ImageRef.from_bytes(tint_background(c.image.read_bytes(), level, channels))})
            for c in comps)

    return item.model_copy(update={"components": repaint(item.components), "fixed": repaint(item.fixed)})


# --- tokenisation ---------------------------------------------------------------------------------

def chat_text(tokenizer, prompt: Prompt) -> tuple[str, bool]:
    """The prompt as the LLaVA runner renders it (the shared `chat_messages`, the checkpoint's chat
    template, the generation prompt), and whether the tokenizer should add BOS (not when the template did)."""
    text = tokenizer.apply_chat_template(chat_messages(prompt), add_generation_prompt=True, tokenize=False)
    bos = tokenizer.bos_token
    return text, not (bos and text.startswith(bos))


def encode_prompt(processor, prompt: Prompt) -> tuple[list[int], torch.Tensor | None]:
    """Prompt token ids and pixel values, exactly as the LLaVA runner feeds the model (its chat
    messages, the checkpoint's chat template, the library processor, BOS from the template)."""
    text, add_bos = chat_text(processor.tokenizer, prompt)
    images = [ref.to_pil() for ref in prompt.images()]
    enc = processor(text=[text], images=images or None, return_tensors="pt", add_special_tokens=add_bos)
    return enc["input_ids"][0].tolist(), (enc["pixel_values"] if images else None)


def reply_ids(tokenizer, text: str) -> list[int]:
    return [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]


@dataclass
class Branch:
    """One sibling prompt's tokens after the shared prefix: the rest of its prompt, then its reply."""

    item_id: str
    question: str
    mode: str
    permutation: tuple[int, ...]
    input_ids: list[int]
    labels: list[int]
    answer_first: bool = False  # a CoT reply answering at once in the template (`target_text`)


@dataclass
class Packed:
    """Several rendered prompts of one item's evidence sharing a token prefix (see module docstring)."""

    dataset: str
    facet: str
    prefix_ids: list[int]
    branches: list[Branch]
    pixel_values: torch.Tensor | None  # (n_images, 3, H, W), all in the prefix, display order
    image_token_id: int = -1
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prefix_ids) + sum(len(b.input_ids) for b in self.branches)

    def sequences(self) -> list[tuple[list[int], list[int]]]:
        """Each branch as the full (input_ids, labels) it stands for (prefix + branch)."""
        return [(self.prefix_ids + b.input_ids, [IGNORE_INDEX] * len(self.prefix_ids) + b.labels)
                for b in self.branches]


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    n = min(len(s) for s in seqs)
    for i in range(n):
        if any(s[i] != seqs[0][i] for s in seqs[1:]):
            return i
    return n


def encode_packed(processor, item: Item, facet_name: str, permutation: Sequence[int],
                  branches: Sequence[tuple]) -> Packed:
    """Render each (sibling item, mode, permutation[, answer_first]) with the facet, tokenise, share the prefix.

    The first sibling goes through the full processor (images included); the others show the same
    images, so their text is tokenised with each ``<image>`` expanded to the same number of tokens
    the processor used (the tests check this equals the full processor call). The prefix always
    stops before the last prompt token, so every branch has at least one prompt token of its own."""
    fct = facet(facet_name)
    tok = processor.tokenizer
    image_id = tok.convert_tokens_to_ids(processor.image_token)
    rendered = []
    pixels = None
    per_image = 0
    for i, (sib, mode, perm, *first) in enumerate(branches):
        first = bool(first and first[0])
        prompt = fct.render(sib, perm, mode)
        if i == 0:
            ids, pixels = encode_prompt(processor, prompt)
            n_images = len(prompt.images())
            per_image = ids.count(image_id) // n_images if n_images else 0
        else:
            ids = encode_text_only(processor, prompt, per_image)
        rendered.append((sib, mode, tuple(perm), ids, reply_ids(tok, target_text(sib, fct, perm, mode, first)),
                         first))
    p = min(common_prefix_len([r[3] for r in rendered]), min(len(r[3]) for r in rendered) - 1)
    out = []
    for sib, mode, perm, ids, reply, first in rendered:
        if image_id in ids[p:]:
            raise ValueError(f"{item.item_id}: an image lies after the shared prefix; siblings must share images")
        rest = ids[p:]
        out.append(Branch(sib.item_id, sib.question, str(mode), perm, rest + reply,
                          [IGNORE_INDEX] * len(rest) + reply, first))
    return Packed(item.dataset, facet_name, rendered[0][3][:p], out, pixels, image_id,
                  {"item_id": item.item_id, "permutation": tuple(permutation)})


def encode_text_only(processor, prompt: Prompt, tokens_per_image: int) -> list[int]:
    """`encode_prompt`'s token ids without processing the images again (each ``<image>`` expanded to
    `tokens_per_image` tokens, as `LlavaProcessor` does for the model's fixed image size)."""
    text, add_bos = chat_text(processor.tokenizer, prompt)
    text = text.replace(processor.image_token, processor.image_token * tokens_per_image)
    return processor.tokenizer(text, add_special_tokens=add_bos)["input_ids"]


def random_permutation(rng: random.Random, n: int) -> tuple[int, ...]:
    perm = list(range(n))
    rng.shuffle(perm)
    return tuple(perm)


@dataclass
class Pool:
    """The train items of every set, with the facets each can be rendered under."""

    items: dict[str, list[Item]]
    facets: dict[str, tuple[str, ...]]

    @classmethod
    def load(cls, sets: Sequence[str], n_per_set: int, seed: int = 42, split: str = "train") -> Pool:
        return cls({s: load_items(s, split, n_per_set, seed) for s in sets}, {s: set_facets(s) for s in sets})


def sample_packed_spec(rng: random.Random, pool: Pool, weights: dict[str, float], p_cot: float,
                       max_branches: int, answer_first: dict[str, float] | None = None,
                       background: Mapping[str, Background] | None = None,
                       ) -> tuple[Item, str, tuple[int, ...], list[tuple]]:
    """Draw an item (set by weight, item uniformly), a facet, an ordering (uniform over all n!), and up
    to `max_branches` of its questions (uniformly, without replacement), each with its own mode; under
    option_order, whose options follow the question, each branch also gets its own option order. A CoT
    branch of a set in `answer_first` answers first (`target_text`) with that set's probability (other
    sets: no draw, so the stream of every stage without `answer_first` is unchanged). A set in `background`
    gets a background level drawn for the example's pictures, and its CoT branches answer first iff that
    level is below the threshold (`Background`; other sets: no draw either)."""
    names = list(weights)
    name = rng.choices(names, weights=[weights[n] for n in names])[0]
    item = rng.choice(pool.items[name])
    bg = (background or {}).get(name)
    if bg is not None:  # the level is drawn here, before the facet: the stream of a stage without it is unchanged
        level = bg.draw(rng)
        item = with_background(item, level, bg.channels)
    supported = [f for f in pool.facets[name] if facet(f).unsupported_reason(item) is None]
    facet_name = rng.choice(supported)
    fct = facet(facet_name)
    n = len(fct.orderables(item))
    perm = random_permutation(rng, n)
    qas = questions(item)
    chosen = rng.sample(qas, min(max_branches, len(qas)))
    per_branch_order = facet_name == "option_order"
    p_first = (answer_first or {}).get(name, 0.0)
    branches = []
    for qa in chosen:
        mode = PromptMode.COT if rng.random() < p_cot else PromptMode.DIRECT
        first = p_first > 0 and mode == PromptMode.COT and rng.random() < p_first
        if bg is not None:
            first = mode == PromptMode.COT and bg.answers_first(level)
        branches.append((sibling(item, qa), mode, random_permutation(rng, n) if per_branch_order else perm, first))
    return item, facet_name, perm, branches


def spec_stream(pool: Pool, weights: dict[str, float], seed: int, p_cot: float = 0.5,
                max_branches: int = 4, answer_first: dict[str, float] | None = None,
                background: Mapping[str, Background] | None = None) -> Iterator[tuple]:
    """An endless, seeded stream of example specs (`sample_packed_spec`): cheap, nothing rendered yet."""
    rng = random.Random(seed)
    while True:
        yield sample_packed_spec(rng, pool, weights, p_cot, max_branches, answer_first, background)


def packed_stream(processor, pool: Pool, weights: dict[str, float], seed: int, p_cot: float = 0.5,
                  max_branches: int = 4, answer_first: dict[str, float] | None = None) -> Iterator[Packed]:
    """An endless, seeded stream of packed examples."""
    for spec in spec_stream(pool, weights, seed, p_cot, max_branches, answer_first):
        yield encode_packed(processor, *spec)


def collate_packed(examples: Sequence[Packed], pad_id: int) -> dict[str, torch.Tensor]:
    """One row per packed example: [prefix | branch 1 | branch 2 | ...], right-padded.

    Returns the model inputs (`input_ids`, a 4-D boolean `attention_mask` (B, 1, T, T): causal inside
    the prefix, each branch sees the prefix and its own earlier tokens, padding sees only itself;
    `position_ids` restarting after the prefix for each branch; `pixel_values`), plus `targets`
    (B, T): the token each position must predict (its successor in the same branch; -100 where there
    is no loss) and `segments` (B, T): the (row-local) branch number whose reply a target belongs to."""
    width = max(len(e) for e in examples)
    b = len(examples)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    pos = torch.zeros((b, width), dtype=torch.long)
    targets = torch.full((b, width), IGNORE_INDEX, dtype=torch.long)
    segments = torch.full((b, width), -1, dtype=torch.long)
    mask = torch.zeros((b, 1, width, width), dtype=torch.bool)
    for r, e in enumerate(examples):
        p = len(e.prefix_ids)
        ids[r, :p] = torch.tensor(e.prefix_ids, dtype=torch.long)
        pos[r, :p] = torch.arange(p)
        mask[r, 0, :p, :p] = torch.ones(p, p, dtype=torch.bool).tril()
        start = p
        for j, br in enumerate(e.branches):
            n = len(br.input_ids)
            sl = slice(start, start + n)
            ids[r, sl] = torch.tensor(br.input_ids, dtype=torch.long)
            pos[r, sl] = torch.arange(p, p + n)
            mask[r, 0, sl, :p] = True
            mask[r, 0, sl, sl] = torch.ones(n, n, dtype=torch.bool).tril()
            labels = torch.tensor(br.labels, dtype=torch.long)
            targets[r, start: start + n - 1] = labels[1:]
            segments[r, start: start + n - 1] = torch.where(labels[1:] != IGNORE_INDEX, j, -1)
            if br.labels[0] != IGNORE_INDEX:
                raise ValueError("a reply must not start a branch")
            start += n
        for t in range(start, width):  # padding attends to itself only (no empty softmax rows)
            mask[r, 0, t, t] = True
    batch = {"input_ids": ids, "attention_mask": mask, "position_ids": pos, "targets": targets,
             "segments": segments}
    pixels = [e.pixel_values for e in examples if e.pixel_values is not None]
    if pixels:
        batch["pixel_values"] = torch.cat(pixels)
    return batch


def tokenizer_corpus(pool: Pool, seed: int, per_set: int = 400) -> Iterator[str]:
    """Texts to train the tokenizer on: rendered prompts and replies of the train split (all
    questions of each item, both modes, random orderings)."""
    rng = random.Random(seed)
    for name, items in pool.items.items():
        for item in items[:per_set]:
            for facet_name in pool.facets[name]:
                fct = facet(facet_name)
                if fct.unsupported_reason(item) is not None:
                    continue
                perm = random_permutation(rng, len(fct.orderables(item)))
                for qa in questions(item)[:3]:
                    sib = sibling(item, qa)
                    for mode in PromptMode:
                        prompt = fct.render(sib, perm, mode)
                        yield prompt.system
                        for m in prompt.messages:
                            yield m.text()
                        yield target_text(sib, fct, perm, mode)


__all__ = [
    "IGNORE_INDEX", "WHITE", "Background", "Branch", "Packed", "Pool", "answer_of", "available_sets", "collate_packed",
    "common_prefix_len", "encode_packed", "encode_prompt", "encode_text_only", "generator_version", "tint_background", "load_items",
    "chat_text", "packed_stream", "random_permutation", "sample_packed_spec", "set_facets",
    "target_text", "tokenizer_corpus", "with_background",
]
