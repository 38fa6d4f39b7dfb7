"""Warm-up: induction, labelled-lookup and caption sequences, supervised on the copy only, that a model can learn."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from facet_probe.datasets.synthetic.vocab import COLOURS, SHAPES
from facet_probe_dev.tiny_vlm.architecture import TinyVLMSpec, build_model
from facet_probe_dev.tiny_vlm.pretrain import IGNORE_INDEX, CopyTasks, copy_loss

SMALL = TinyVLMSpec(vision_hidden=32, vision_layers=1, vision_heads=2, text_hidden=32, text_layers=1,
                    text_heads=2, text_kv_heads=2, text_intermediate=64)


@pytest.fixture(scope="module")
def tok(processor):
    return processor.tokenizer


def test_sequences_use_ordinary_tokens_only(tok):
    tasks = CopyTasks(tok, seed=0)
    reserved = set(tok.all_special_ids) | set(tok.get_added_vocab().values())
    assert len(tasks.tokens) > 300 and not reserved & set(tasks.tokens)
    assert len(tasks.words) >= 30 and set(tasks.words) <= set(tasks.tokens)
    assert tok.convert_ids_to_tokens(tasks.labels) == list("ABCDEF")


def test_induction_repeats_a_span_and_supervises_exactly_the_repeat(tok):
    tasks = CopyTasks(tok, seed=0)
    lengths = set()
    for _ in range(200):
        ids, targets, pixels = tasks.induction()
        assert pixels is None
        assert len(ids) == len(targets) and len(ids) % 2 == 1 and ids[0] == tok.bos_token_id
        n = len(ids) // 2
        lengths.add(n)
        assert ids[1 + n:] == ids[1: 1 + n]  # the second half repeats the first
        supervised = [i for i, t in enumerate(targets) if t != IGNORE_INDEX]
        # every position inside the repeat predicts the next token of the repeat; nothing else is supervised
        assert supervised == list(range(n + 1, 2 * n))
        assert all(targets[i] == ids[i + 1] == ids[i + 1 - n] for i in supervised)
    assert min(lengths) <= 8 and max(lengths) >= 20


def test_lookup_targets_are_the_labels_shown_with_the_queried_words(tok):
    """Lines "<label>. <word>\n", then per shown word a phrase that mentions it (and no other listed
    word), a gap fixed within the sequence, and its label: only the token before the label is supervised."""
    tasks = CopyTasks(tok, seed=0)
    dot, newline = tok.convert_tokens_to_ids(["."])[0], tok.convert_tokens_to_ids(["Ċ"])[0]
    gap_lengths, mention_slots = set(), set()
    for _ in range(300):
        ids, targets, pixels = tasks.lookup()
        assert pixels is None and len(ids) == len(targets) and ids[0] == tok.bos_token_id
        label_positions = [i for i, t in enumerate(targets) if t != IGNORE_INDEX]
        n = len(label_positions)
        assert 2 <= n <= 6
        lines = [ids[1 + 4 * k: 5 + 4 * k] for k in range(n)]
        shown = {}
        for label, d, word, nl in lines:
            assert (d, nl) == (dot, newline) and label in tasks.labels and word in tasks.words
            shown[word] = label
        assert len(shown) == n and [line[0] for line in lines] == sorted(shown.values())  # listed in A-F order
        start, asked, gaps = 1 + 4 * n, [], []
        for i in label_positions:
            query, label = ids[start: i + 1], ids[i + 1]
            assert ids[i + 2] == newline and targets[i] == label
            mentioned = [w for w in query if w in shown]
            assert len(mentioned) == 1 and shown[mentioned[0]] == label
            slot = query.index(mentioned[0])
            mention_slots.add(slot)
            gaps.append(query[slot + 1:])
            asked.append(mentioned[0])
            start = i + 3
        assert sorted(asked) == sorted(shown)  # every shown word is queried once
        common = 0  # the gap closing every query: their common suffix (at most 2 filler words more)
        while common < min(map(len, gaps)) and len({tuple(g[len(g) - common - 1:]) for g in gaps}) == 1:
            common += 1
        gap_lengths.add(common)
    assert {0, 1, 2, 3} <= mention_slots and {0, 4} <= gap_lengths and max(gap_lengths) <= 6


def test_captions_name_each_shape_of_a_synthetic_style_picture(processor):
    tok = processor.tokenizer
    tasks = CopyTasks(processor, seed=0)
    image_id = tok.convert_tokens_to_ids("<image>")
    counts = Counter()
    for _ in range(40):
        ids, targets, pixels = tasks.caption()
        assert pixels.shape == (1, 3, 64, 64) and ids.count(image_id) == 16 and ids[1:17] == [image_id] * 16
        assert ids[-1] == tok.eos_token_id and len(ids) == len(targets)
        caption = tok.decode(ids[17:-1])
        objects = caption.strip(" .").split(" and ")
        counts[len(objects)] += 1
        for obj in objects:
            _article, colour, shape = obj.split()
            assert colour in COLOURS and shape in SHAPES
        supervised = [i for i, t in enumerate(targets) if t != IGNORE_INDEX]
        assert supervised == list(range(16, len(ids) - 1))  # from the last image token to the last word
        assert all(targets[i] == ids[i + 1] for i in supervised)
    assert counts[1] and sum(counts[k] for k in (2, 3, 4)) and max(counts) <= 4


def test_a_caption_picture_is_what_it_says(processor):
    """The caption's colours are the picture's colours (the picture is drawn, not random noise)."""
    tasks = CopyTasks(processor, seed=1)
    for _ in range(20):
        image, caption = tasks.picture()
        pixels = {px for px in image.get_flattened_data() if px != (255, 255, 255)}
        named = {COLOURS[word] for word in caption.replace(".", "").split() if word in COLOURS}
        assert pixels == named, caption


def test_lookup_labels_and_slots_favour_no_letter(tok):
    """Over many lookups each label A-F is a target about equally often and no label always comes first."""
    tasks = CopyTasks(tok, seed=0)
    answered, listed_first, queried_first = Counter(), Counter(), Counter()
    for _ in range(600):
        ids, targets, _ = tasks.lookup()
        answered.update(t for t in targets if t != IGNORE_INDEX)
        listed_first[ids[1]] += 1
        queried_first[next(t for t in targets if t != IGNORE_INDEX)] += 1
    assert set(answered) == set(tasks.labels)
    counts = {tok.convert_ids_to_tokens(k): v for k, v in sorted(answered.items())}
    assert min(answered.values()) > 0.6 * max(answered.values()), counts  # a warm-up prior on letters
    assert len(listed_first) > 1 and max(listed_first.values()) < 0.8 * 600
    assert len(queried_first) > 1 and max(queried_first.values()) < 0.5 * 600


def _lookup_rows(tasks: CopyTasks, batch: dict[str, torch.Tensor]) -> int:
    """Rows whose supervised targets are all option labels (an induction row's are random tokens)."""
    return sum(set(t[t != IGNORE_INDEX].tolist()) <= set(tasks.labels) for t in batch["targets"])


def test_batch_pads_right_masks_tokens_and_mixes_the_patterns(tok):
    tasks = CopyTasks(tok, seed=0)
    batch = tasks.batch(32, lookup_share=0.5)
    ids, mask, targets = batch["input_ids"], batch["attention_mask"], batch["targets"]
    assert ids.shape == mask.shape == targets.shape and ids.shape[0] == 32
    lengths = mask.sum(1)
    assert int(lengths.max()) == ids.shape[1] and bool((ids[:, 0] == tok.bos_token_id).all())
    for r, n in enumerate(lengths.tolist()):
        assert mask[r, :n].eq(1).all() and mask[r, n:].eq(0).all()  # right padding
        assert ids[r, n:].eq(tok.pad_token_id).all() and targets[r, n:].eq(IGNORE_INDEX).all()
        assert targets[r, :n].ne(IGNORE_INDEX).any()
    assert 6 <= _lookup_rows(tasks, batch) <= 26
    assert _lookup_rows(tasks, tasks.batch(16, lookup_share=0.0)) == 0
    assert _lookup_rows(tasks, tasks.batch(16, lookup_share=1.0)) == 16
    assert "pixel_values" not in batch


def test_batch_with_captions_carries_one_picture_per_caption_row(processor):
    tasks = CopyTasks(processor, seed=0)
    batch = tasks.batch(24, lookup_share=0.3, caption_share=0.4)
    image_id = processor.tokenizer.convert_tokens_to_ids("<image>")
    caption_rows = int((batch["input_ids"] == image_id).any(1).sum())
    assert 3 <= caption_rows <= 18 and batch["pixel_values"].shape[0] == caption_rows
    assert int((batch["input_ids"] == image_id).sum()) == 16 * caption_rows


def test_batches_are_seeded(tok):
    first, again, other = (CopyTasks(tok, seed=s).batch(8) for s in (3, 3, 4))
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert first["input_ids"].shape != other["input_ids"].shape or not torch.equal(first["input_ids"],
                                                                                   other["input_ids"])


def test_copy_loss_projecting_only_the_supervised_positions_is_the_loss_over_every_position(tok):
    model = build_model(SMALL, tok, seed=0).eval()
    batch = CopyTasks(tok, seed=5).batch(8)
    with torch.no_grad():
        fast, fast_acc = copy_loss(model, batch)
        full, full_acc = copy_loss(model, batch, supervised_only=False)
    assert torch.isclose(fast, full, atol=1e-5) and fast_acc == full_acc


def test_copy_loss_is_finite_with_an_accuracy_and_falls_with_training(tok):
    torch.manual_seed(0)
    model = build_model(SMALL, tok, seed=0)
    held_out = CopyTasks(tok, seed=99).batch(64)
    model.eval()
    with torch.no_grad():
        before, acc = copy_loss(model, held_out)
    assert math.isfinite(float(before)) and 0.0 <= acc <= 1.0
    assert abs(float(before) - math.log(len(tok))) < 0.5  # untrained: about uniform over the vocabulary
    model.train()
    tasks = CopyTasks(tok, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(80):
        loss, _ = copy_loss(model, tasks.batch(16))
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        after, acc_after = copy_loss(model, held_out)
    assert float(after) < float(before) - 1.0, (float(before), float(after))
    assert acc_after > acc
