"""Content-free warm-up sequences for the tiny VLM: copy patterns and picture captions.

Trained from scratch on answer-only supervision, a tiny transformer sits on a long loss plateau
before it discovers in-context copying (the "induction head" transition), and its vision tower learns
nothing while the language model cannot yet read it. These cheap sequences teach the generic skills
first (measured in docs/tiny_vlm.md: induction is learnt in ~250 steps at lr 2e-3, and the free-form
sets then follow; the same warm-up *delays* reading option letters, hence the stage order in
`train.py`):

- *induction*: a random span, then the same span again (predict each next token of the repeat);
  learnt in ~250 steps alone;
- *labelled lookup*: lines ``<label>. <word>`` (labels a sorted random subset of A-F, words in
  random order), then one query per word: a short phrase of unlisted words that mentions it, a gap
  (a random phrase of 0-4 tokens, fixed within a sequence), and the label to predict. This is the
  generic form of reading an option letter off a list after naming the option's content, as in
  "Cara has a key. The answer is (D";
- *captions* (LLaVA's feature-alignment stage): a picture drawn like the synthetic ones (one shape,
  or 2-4 shapes in a 2x2 grid), then its caption ``a red circle and a blue square.`` in reading order.

The sequences carry no task content (random tokens, or pictures with their colours and shapes) and
favour no position or letter: labels, slots and queries are drawn uniformly.
"""

from __future__ import annotations

import io
import random

import torch
from PIL import Image

from facet_probe.datasets.synthetic.draw import Placed, render_png
from facet_probe.datasets.synthetic.visual_mcq import GRID, draw_scene
from facet_probe.datasets.synthetic.vocab import a
from facet_probe.facets.prompts import OPTION_LETTERS
from facet_probe_dev.tiny_vlm.architecture import logits_at

IGNORE_INDEX = -100
N_LABELS = 6

Row = tuple[list[int], list[int], torch.Tensor | None]  # ids, targets (next token at each position), pixels


class CopyTasks:
    """Seeded batches of the warm-up patterns over a processor's tokenizer and image processor."""

    def __init__(self, processor, seed: int, image_tokens: int = 16, image_size: int = 64,
                 max_gap: int = 4, max_fillers: int = 3) -> None:
        tokenizer = processor.tokenizer if hasattr(processor, "tokenizer") else processor
        self.processor = processor if hasattr(processor, "image_processor") else None
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)
        special = set(tokenizer.all_special_ids)
        added = set(tokenizer.get_added_vocab().values())
        self.bos = tokenizer.bos_token_id
        self.eos = tokenizer.eos_token_id
        self.pad = tokenizer.pad_token_id
        vocab = tokenizer.get_vocab()
        self.words = sorted(i for t, i in vocab.items()
                            if i not in special and i not in added and t.startswith("Ġ") and len(t) > 2)
        self.tokens = sorted(i for i in vocab.values() if i not in special and i not in added)
        self.labels = [vocab[c] for c in OPTION_LETTERS[:N_LABELS]]
        self.dot = vocab["."]
        self.newline = vocab["Ċ"]
        self.image_token = tokenizer.convert_tokens_to_ids("<image>")
        self.image_tokens = image_tokens
        self.image_size = image_size
        self.max_gap = max_gap
        self.max_fillers = max_fillers

    def induction(self) -> Row:
        n = self.rng.randint(6, 24)
        span = [self.rng.choice(self.tokens) for _ in range(n)]
        ids = [self.bos, *span, *span]  # position i predicts targets[i]
        targets = [IGNORE_INDEX] * (n + 1) + span[1:] + [IGNORE_INDEX]
        return ids, targets, None

    def lookup(self) -> Row:
        n = self.rng.randint(2, N_LABELS)
        labels = sorted(self.rng.sample(self.labels, n))
        words = self.rng.sample(self.words, n)
        others = [w for w in self.words if w not in words]
        gap = [self.rng.choice(self.tokens) for _ in range(self.rng.randint(0, self.max_gap))]
        gap = [t for t in gap if t not in words]
        ids, targets = [self.bos], [IGNORE_INDEX]
        for label, word in zip(labels, words, strict=True):
            ids += [label, self.dot, word, self.newline]
            targets += [IGNORE_INDEX] * 4
        for q in self.rng.sample(range(n), n):  # the token before the label predicts it
            before = [self.rng.choice(others) for _ in range(self.rng.randint(0, self.max_fillers))]
            after = [self.rng.choice(others) for _ in range(self.rng.randint(0, min(2, self.max_fillers)))]
            query = [*before, words[q], *after, *gap]
            ids += [*query, labels[q], self.newline]
            targets += [IGNORE_INDEX] * (len(query) - 1) + [labels[q], IGNORE_INDEX, IGNORE_INDEX]
        return ids, targets, None

    def picture(self) -> tuple[Image.Image, str]:
        """A picture like the synthetic sets' (one shape, or 2-4 in a grid) and its caption."""
        count = 1 if self.rng.random() < 0.5 else self.rng.randint(2, GRID * GRID)
        scene = draw_scene(self.rng, count)  # distinct shapes and colours, as the sets draw them
        if count == 1:
            placed, grid = [Placed(scene[0]["shape"], scene[0]["colour"])], 1
        else:
            cells = sorted(self.rng.sample(range(GRID * GRID), count))
            placed, grid = [Placed(o["shape"], o["colour"], cell) for o, cell in zip(scene, cells, strict=True)], GRID
        png = render_png(placed, self.image_size, grid)
        caption = " " + " and ".join(a(f"{p.colour} {p.shape}") for p in placed) + "."
        return Image.open(io.BytesIO(png)).convert("RGB"), caption

    def caption(self) -> Row:
        if self.processor is None:
            raise ValueError("caption rows need a processor with an image processor, not a bare tokenizer")
        image, text = self.picture()
        words = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [self.bos, *[self.image_token] * self.image_tokens, *words, self.eos]
        targets = [IGNORE_INDEX] * self.image_tokens + words + [self.eos, IGNORE_INDEX]
        pixels = self.processor.image_processor(images=[image], return_tensors="pt")["pixel_values"]
        return ids, targets, pixels

    def row(self, lookup_share: float, caption_share: float) -> Row:
        u = self.rng.random()
        if u < caption_share:
            return self.caption()
        if u < caption_share + lookup_share:
            return self.lookup()
        return self.induction()

    def batch(self, size: int, lookup_share: float = 0.5, caption_share: float = 0.0) -> dict[str, torch.Tensor]:
        rows = [self.row(lookup_share, caption_share) for _ in range(size)]
        width = max(len(ids) for ids, _, _ in rows)
        ids = torch.full((size, width), self.pad, dtype=torch.long)
        mask = torch.zeros((size, width), dtype=torch.long)
        targets = torch.full((size, width), IGNORE_INDEX, dtype=torch.long)
        for r, (seq, tgt, _) in enumerate(rows):
            ids[r, : len(seq)] = torch.tensor(seq)
            mask[r, : len(seq)] = 1
            targets[r, : len(seq)] = torch.tensor(tgt)
        batch = {"input_ids": ids, "attention_mask": mask, "targets": targets}
        pixels = [p for _, _, p in rows if p is not None]
        if pixels:
            batch["pixel_values"] = torch.cat(pixels)
        return batch


def copy_loss(model, batch: dict[str, torch.Tensor], supervised_only: bool = True) -> tuple[torch.Tensor, float]:
    """Mean cross-entropy on the supervised positions, and the accuracy there. `supervised_only`: only
    those positions go through the vocabulary projection (`logits_at`); else every position (the float
    path of the shipped weights, `TrainConfig.fast`)."""
    targets = batch["targets"]
    keep = targets != IGNORE_INDEX
    inputs = {k: v for k, v in batch.items() if k != "targets"}
    if supervised_only:
        logits = logits_at(model, inputs, keep)
        loss = torch.nn.functional.cross_entropy(logits, targets[keep])
    else:
        full = model(**inputs, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(full.float().transpose(1, 2), targets, ignore_index=IGNORE_INDEX)
        logits = full[keep]
    acc = float((logits.detach().argmax(-1) == targets[keep]).float().mean())
    return loss, acc


__all__ = ["CopyTasks", "copy_loss"]
