"""Training data: the runner's exact tokenisation of real renderings, packed per item without changing a logit."""

from __future__ import annotations

import io
import math
import random
import re

import numpy as np
import pytest
import torch
from PIL import Image

from facet_probe.core.prompts import PromptMode
from facet_probe.facets import FACETS
from facet_probe.facets.prompts import COT_ANSWER_TEMPLATE, DIRECT_ANSWER_TEMPLATE
from facet_probe.scoring.score import score
from facet_probe_dev.tiny_vlm.architecture import TinyVLMSpec, build_model
from facet_probe_dev.tiny_vlm.data import (
    IGNORE_INDEX,
    WHITE,
    Background,
    answer_of,
    available_sets,
    collate_packed,
    encode_packed,
    encode_prompt,
    facet,
    packed_stream,
    random_permutation,
    sample_packed_spec,
    target_text,
    tint_background,
    with_background,
)
from facet_probe_dev.tiny_vlm.questions import questions, recognised, sibling
from facet_probe_dev.tiny_vlm.tokenizer import IMAGE_TOKEN
from facet_probe_dev.tiny_vlm.train import AnswerTracker, reply_loss

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

SMALL = TinyVLMSpec(vision_hidden=32, vision_layers=1, vision_heads=2, text_hidden=32, text_layers=1,
                    text_heads=2, text_kv_heads=2, text_intermediate=64)


def _branches(item, facet_name: str, rng: random.Random, k: int = 3):
    """Up to `k` of the item's questions, modes alternating; option_order: one option order each."""
    n = len(facet(facet_name).orderables(item))
    perm = random_permutation(rng, n)
    modes = [PromptMode.DIRECT, PromptMode.COT] * k
    own = facet_name == "option_order"
    return perm, [(sibling(item, qa), modes[i], random_permutation(rng, n) if own else perm)
                  for i, qa in enumerate(questions(item)[:k])]


def _reply_ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


@pytest.fixture(scope="module")
def model(processor):
    return build_model(SMALL, processor.tokenizer, seed=0).eval()


@pytest.fixture(scope="module")
def packs(pool, processor):
    """One packed example per set with images in different places (a figure, an image set) and two
    text-only ones (documents, real chat turns), three questions each in mixed modes."""
    rng = random.Random(5)
    out = []
    for name in ("synthetic_visual_mcq", "synthetic_image_set", "synthetic_docs", "synthetic_dialog"):
        item = pool.items[name][1]
        facet_name = pool.facets[name][0]
        perm, branches = _branches(item, facet_name, rng)
        assert len(branches) >= 2, name
        out.append(encode_packed(processor, item, facet_name, perm, branches))
    return out


def test_all_nine_sets_load_from_the_train_split(pool):
    assert list(pool.items) == available_sets() and len(pool.items) == 9
    for name, items in pool.items.items():
        assert len(items) == 8, name
        assert all(it.dataset == name and it.metadata["split"] == "train" for it in items), name
        assert pool.facets[name] and all(f in FACETS for f in pool.facets[name]), name


def test_each_branch_is_the_runners_tokenisation_of_its_sibling_prompt_then_the_reply(pool, processor):
    tok = processor.tokenizer
    image_id = tok.convert_tokens_to_ids(IMAGE_TOKEN)
    rng = random.Random(0)
    for name, items in pool.items.items():
        facet_name = pool.facets[name][0]
        fct = facet(facet_name)
        for item in items[:2]:
            perm, branches = _branches(item, facet_name, rng)
            packed = encode_packed(processor, item, facet_name, perm, branches)
            assert (packed.dataset, packed.facet, len(packed.branches)) == (name, facet_name, len(branches))
            n_images = len(item.images())
            assert packed.prefix_ids.count(image_id) == 16 * n_images, name
            assert (packed.pixel_values is None) == (n_images == 0), name
            full_lengths = []
            for (sib, mode, p), br, (ids, labels) in zip(branches, packed.branches, packed.sequences(),
                                                         strict=True):
                prompt_ids, pixels = encode_prompt(processor, fct.render(sib, p, mode))
                text = target_text(sib, fct, p, mode)
                reply = _reply_ids(tok, text)
                assert ids == packed.prefix_ids + br.input_ids == prompt_ids + reply, (name, mode)
                assert labels == [IGNORE_INDEX] * len(prompt_ids) + reply
                assert tok.decode(reply[:-1]) == text and reply[-1] == tok.eos_token_id
                assert image_id not in br.input_ids
                assert (br.question, br.mode, br.permutation) == (sib.question, str(mode), tuple(p))
                if n_images:
                    assert pixels.shape == (n_images, 3, 64, 64)
                    assert torch.equal(packed.pixel_values, pixels)  # every sibling shows the same images
                full_lengths.append(len(ids))
            if len(branches) > 1:  # the evidence is tokenised once
                assert len(packed) == sum(full_lengths) - (len(branches) - 1) * len(packed.prefix_ids)
                assert len(packed.prefix_ids) > 0.4 * min(full_lengths), name


def test_targets_are_correct_parseable_answers_for_every_sibling_in_both_modes(pool):
    rng = random.Random(1)
    for name, items in pool.items.items():
        fct = facet(pool.facets[name][0])
        for item in items:
            perm = random_permutation(rng, len(fct.orderables(item)))
            for qa in questions(item):
                sib = sibling(item, qa)
                assert recognised(sib), (name, qa.question)
                answer = answer_of(sib, fct, perm)
                for mode in PromptMode:
                    prompt = fct.render(sib, perm, mode)
                    text = target_text(sib, fct, perm, mode)
                    s = score(sib, fct, perm, prompt, text)
                    assert s.correct and s.parse_status == "ok", (name, mode, text, s)
                    if mode == PromptMode.DIRECT:
                        assert text == DIRECT_ANSWER_TEMPLATE.format(answer=answer) and text.startswith("Answer: ")
                    else:
                        closing = COT_ANSWER_TEMPLATE.format(answer=answer)
                        assert text == f"{qa.rationale} {closing}", (name, text)
                        sentences = re.split(r"(?<=\.)\s+", qa.rationale)
                        assert 1 <= len(sentences) <= 2 and all(s.endswith(".") for s in sentences), text
    assert COT_ANSWER_TEMPLATE == "The answer is ({answer})."


def test_sampling_draws_sets_modes_orderings_and_several_questions_per_item(pool):
    rng = random.Random(3)
    weights = {name: 1.0 for name in pool.items}
    specs = [sample_packed_spec(rng, pool, weights, p_cot=0.5, max_branches=4) for _ in range(400)]
    assert {item.dataset for item, *_ in specs} == set(pool.items)
    modes = [{m for _, m, *_ in branches} for *_, branches in specs]
    assert set().union(*modes) == set(PromptMode) and sum(len(m) == 2 for m in modes) > 50
    identity = expected = 0.0
    per_branch_orders = 0
    for item, facet_name, perm, branches in specs:
        assert item in pool.items[item.dataset] and facet_name in pool.facets[item.dataset]
        n = len(facet(facet_name).orderables(item))
        assert sorted(perm) == list(range(n))
        identity += perm == tuple(range(n))
        expected += 1 / math.factorial(n)
        qas = {(qa.question, qa.gold) for qa in questions(item)}
        asked = [(sib.question, sib.gold) for sib, *_ in branches]
        assert len(asked) == min(4, len(qas)) and len(set(asked)) == len(asked) and set(asked) <= qas
        assert all(sib.components == item.components and sib.choices == item.choices for sib, *_ in branches)
        if facet_name == "option_order":
            assert all(sorted(p) == list(range(n)) for _, _, p, _ in branches)
            per_branch_orders += len({p for _, _, p, _ in branches}) > 1
        else:
            assert all(p == perm for _, _, p, _ in branches)
    assert identity / len(specs) < expected / len(specs) + 0.05  # identity drawn no more than by chance
    assert per_branch_orders > 10
    only_docs = {name: float(name == "synthetic_docs") for name in pool.items}
    assert {sample_packed_spec(rng, pool, only_docs, 0.5, 4)[0].dataset for _ in range(30)} == {"synthetic_docs"}
    for p_cot, mode in ((0.0, PromptMode.DIRECT), (1.0, PromptMode.COT)):
        drawn = {m for _ in range(30) for _, m, *_ in sample_packed_spec(rng, pool, weights, p_cot, 4)[3]}
        assert drawn == {mode}


def test_packed_stream_is_seeded(pool, processor):
    weights = {name: 1.0 for name in pool.items}

    def first(seed: int):
        stream = packed_stream(processor, pool, weights, seed=seed)
        return [e.sequences() for e in (next(stream) for _ in range(6))]

    assert first(7) == first(7)
    assert first(7) != first(8)


def test_collate_lays_out_branches_with_targets_segments_and_positions(packs, processor):
    pad = processor.tokenizer.pad_token_id
    batch = collate_packed(packs, pad)
    width = max(len(e) for e in packs)
    assert batch["input_ids"].shape == batch["targets"].shape == batch["segments"].shape == (len(packs), width)
    assert batch["attention_mask"].shape == (len(packs), 1, width, width)
    assert batch["attention_mask"].dtype == torch.bool
    assert torch.equal(batch["pixel_values"], torch.cat([e.pixel_values for e in packs if e.pixel_values is not None]))
    for r, e in enumerate(packs):
        p = len(e.prefix_ids)
        ids, targets, segments = (batch[k][r].tolist() for k in ("input_ids", "targets", "segments"))
        positions, mask = batch["position_ids"][r].tolist(), batch["attention_mask"][r, 0]
        expected_targets = [IGNORE_INDEX] * p
        expected_segments = [-1] * p
        assert ids[:p] == e.prefix_ids and positions[:p] == list(range(p))
        start = p
        spans = []
        for j, br in enumerate(e.branches):
            n = len(br.input_ids)
            assert ids[start: start + n] == br.input_ids
            assert positions[start: start + n] == list(range(p, p + n))  # as if the branch followed the prefix
            nxt = br.labels[1:] + [IGNORE_INDEX]  # each position predicts its successor in the same branch
            expected_targets += nxt
            expected_segments += [j if t != IGNORE_INDEX else -1 for t in nxt]
            assert all(t == br.input_ids[k + 1] for k, t in enumerate(nxt) if t != IGNORE_INDEX)
            spans.append(range(start, start + n))
            start += n
        pad_len = width - start
        assert targets == expected_targets + [IGNORE_INDEX] * pad_len
        assert segments == expected_segments + [-1] * pad_len
        assert set(segments) == {-1, *range(len(e.branches))}  # every branch has a supervised reply
        assert ids[start:] == [pad] * pad_len
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        assert torch.equal(mask[:p, :p], causal[:p, :p]) and not bool(mask[:p, p:].any())
        for a in spans:  # a branch sees the prefix and, causally, itself; never a sibling branch
            assert bool(mask[a.start: a.stop, :p].all())
            assert torch.equal(mask[a.start: a.stop, a.start: a.stop], causal[: len(a), : len(a)])
            for b in spans:
                if a != b:
                    assert not bool(mask[a.start: a.stop, b.start: b.stop].any())
        for t in range(start, width):  # padding sees itself only
            assert mask[t].nonzero().flatten().tolist() == [t]


def test_packed_logits_equal_each_branch_run_alone(packs, processor, model):
    """The key equivalence: packing several prompts in one row is training on them one by one."""
    batch = collate_packed(packs, processor.tokenizer.pad_token_id)
    inputs = {k: v for k, v in batch.items() if k not in ("targets", "segments")}
    with torch.no_grad():
        packed = model(**inputs, use_cache=False).logits
    assert any(e.pixel_values is not None for e in packs) and any(e.pixel_values is None for e in packs)
    for r, e in enumerate(packs):
        p = len(e.prefix_ids)
        start = p
        for br, (ids, _) in zip(e.branches, e.sequences(), strict=True):
            alone = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
            if e.pixel_values is not None:
                alone["pixel_values"] = e.pixel_values
            with torch.no_grad():
                ref = model(**alone).logits[0]
            n = len(br.input_ids)
            assert torch.allclose(packed[r, :p], ref[:p], atol=1e-5), e.dataset
            assert torch.allclose(packed[r, start: start + n], ref[p:], atol=1e-5), (e.dataset, br.question)
            start += n


@pytest.mark.parametrize("replies_only", [True, False])
def test_reply_loss_averages_within_each_reply_then_over_replies(packs, processor, replies_only):
    batch = collate_packed(packs, processor.tokenizer.pad_token_id)
    model = build_model(SMALL, processor.tokenizer, seed=1).eval()
    with torch.no_grad():  # spread the logits (tied embeddings) so that the replies differ in loss
        model.get_input_embeddings().weight.mul_(40.0)
    loss, predicted = reply_loss(model, batch, replies_only=replies_only)
    with torch.no_grad():
        full = model(**{k: v for k, v in batch.items() if k not in ("targets", "segments")}).logits
    replies = batch["segments"] >= 0
    assert torch.equal(predicted[replies], full.argmax(-1)[replies])
    assert (predicted[~replies] == -1).all()
    per_reply, per_token = [], []
    for e in packs:
        for ids, labels in e.sequences():
            alone = {"input_ids": torch.tensor([ids])}
            if e.pixel_values is not None:
                alone["pixel_values"] = e.pixel_values
            with torch.no_grad():
                out = model(**alone).logits[0]
            targets = torch.tensor(labels[1:])
            tok_loss = torch.nn.functional.cross_entropy(out[:-1], targets, reduction="none")
            per_reply.append(tok_loss[targets != IGNORE_INDEX].mean())
            per_token.append(tok_loss[targets != IGNORE_INDEX])
    expected = torch.stack(per_reply).mean()
    assert torch.isclose(loss, expected, atol=1e-4), (float(loss), float(expected))
    assert abs(float(expected - torch.cat(per_token).mean())) > 1e-2  # a per-token mean would not pass


def test_answer_tracker_scores_the_answer_token_per_set_and_mode(pool, processor):
    tok = processor.tokenizer
    item = pool.items["synthetic_docs"][0]
    qas = questions(item)[:3]
    modes = [PromptMode.DIRECT, PromptMode.DIRECT, PromptMode.COT]
    perm = tuple(range(len(facet("document_rank_order").orderables(item))))
    packed = encode_packed(processor, item, "document_rank_order", perm,
                           [(sibling(item, qa), m, perm) for qa, m in zip(qas, modes, strict=True)])
    predicted = torch.full((1, len(packed)), -1)
    start = len(packed.prefix_ids)
    for br, hit in zip(packed.branches, (True, False, True), strict=True):
        reply = [i for i, lab in enumerate(br.labels) if lab != IGNORE_INDEX]
        lead = "Answer:" if br.mode == "direct" else "The answer is ("
        k = next(i for i in reply if tok.decode(br.input_ids[reply[0]: i]).endswith(lead))  # the answer's 1st token
        answer = br.input_ids[k]
        predicted[0, start + k - 1] = answer if hit else (answer + 1) % len(tok)
        start += len(br.input_ids)
    tracker = AnswerTracker(tok)
    tracker.update([packed], predicted)
    assert tracker.summary() == {"docs/cot": 1.0, "docs/direct": 0.5}
    last_only = AnswerTracker(tok, window=1)
    last_only.update([packed], predicted)
    assert last_only.summary() == {"docs/cot": 1.0, "docs/direct": 0.0}


def test_answer_tracker_says_a_stage_is_learnt_once_every_set_and_mode_reaches_the_level(processor):
    tracker = AnswerTracker(processor.tokenizer)
    assert not tracker.reached(["synthetic_docs"], 0.5)  # nothing seen yet
    tracker.hits[("docs", "direct")].extend([1, 1, 1, 0])
    tracker.hits[("docs", "cot")].extend([1, 1])
    assert tracker.reached(["synthetic_docs"], 0.75) and not tracker.reached(["synthetic_docs"], 0.8)
    assert not tracker.reached(["synthetic_docs", "synthetic_dialog"], 0.5)  # dialog not seen
    tracker.hits[("tiny_vlm_echo", "direct")].append(1)
    assert tracker.reached(["synthetic_docs", "tiny_vlm_echo"], 0.75)
    # the level a stage's attempts are compared by: its weakest set and mode
    assert tracker.level(["synthetic_docs", "tiny_vlm_echo"]) == 0.75
    assert tracker.level(["tiny_vlm_echo"]) == 1.0 and tracker.level(["synthetic_dialog"]) == 0.0


def test_an_answer_first_cot_reply_is_the_cot_template_alone(pool):
    """The reply form of the answer-first experiment: the CoT answer sentence with no rationale before it."""
    item = pool.items["synthetic_visual_mcq"][0]
    fct = facet("option_order")
    perm = tuple(range(len(item.choices)))
    letter = answer_of(item, fct, perm)
    assert target_text(item, fct, perm, PromptMode.COT, answer_first=True) == COT_ANSWER_TEMPLATE.format(answer=letter)
    assert target_text(item, fct, perm, PromptMode.COT).endswith(COT_ANSWER_TEMPLATE.format(answer=letter))
    assert len(target_text(item, fct, perm, PromptMode.COT)) > len(COT_ANSWER_TEMPLATE) + 10  # a rationale first
    assert target_text(item, fct, perm, PromptMode.DIRECT, answer_first=True) == target_text(
        item, fct, perm, PromptMode.DIRECT)


def test_only_the_cot_replies_of_the_sets_named_in_answer_first_answer_first(pool, processor):
    weights = {"synthetic_visual_mcq": 1.0, "synthetic_docs": 1.0}
    rng = random.Random(4)
    specs = [sample_packed_spec(rng, pool, weights, 0.5, 4, {"synthetic_visual_mcq": 1.0}) for _ in range(60)]
    for item, _, _, branches in specs:
        for _, mode, _, first in branches:
            assert first == (item.dataset == "synthetic_visual_mcq" and mode == PromptMode.COT)
    # without answer_first the stream draws exactly what it drew before the option existed
    plain = [sample_packed_spec(random.Random(9), pool, weights, 0.5, 4) for _ in range(3)]
    named_other = [sample_packed_spec(random.Random(9), pool, weights, 0.5, 4, {"synthetic_mcq": 1.0})
                   for _ in range(3)]
    assert [[(s.question, m, p, f) for s, m, p, f in spec[3]] for spec in plain] == [
        [(s.question, m, p, f) for s, m, p, f in spec[3]] for spec in named_other]
    assert not any(f for spec in plain for *_, f in spec[3])
    item, facet_name, perm, branches = next(s for s in specs if any(b[3] for b in s[3]))
    packed = encode_packed(processor, item, facet_name, perm, branches)
    tok = processor.tokenizer
    for (sib, mode, p, first), br in zip(branches, packed.branches, strict=True):
        reply = [t for t, lab in zip(br.input_ids, br.labels, strict=True) if lab != IGNORE_INDEX]
        assert br.answer_first == first
        assert reply == _reply_ids(tok, target_text(sib, facet(facet_name), p, mode, answer_first=first))


def test_answer_tracker_keeps_answer_first_replies_apart(pool, processor):
    """An answer-first reply's letter is tracked as `cot_first`, apart from the CoT replies that reason first."""
    item = pool.items["synthetic_visual_mcq"][0]
    qa = questions(item)[0]
    perm = tuple(range(len(item.choices)))
    branches = [(sibling(item, qa), PromptMode.COT, perm, True), (sibling(item, qa), PromptMode.COT, perm, False)]
    packed = encode_packed(processor, item, "option_order", perm, branches)
    predicted = torch.full((1, len(packed)), -1)
    start = len(packed.prefix_ids)
    for br in packed.branches:  # every next token predicted right
        predicted[0, start: start + len(br.input_ids) - 1] = torch.tensor(br.input_ids[1:])
        start += len(br.input_ids)
    tracker = AnswerTracker(processor.tokenizer)
    tracker.update([packed], predicted)
    assert tracker.summary() == {"visual_mcq/cot": 1.0, "visual_mcq/cot_first": 1.0}
    tracker.hits[("visual_mcq", "cot_first")].append(0)
    assert tracker.level(["synthetic_visual_mcq"]) == 0.5


def _pixels(ref) -> np.ndarray:
    return np.array(ref.to_pil())


def test_a_tinted_background_repaints_the_exactly_white_pixels_and_nothing_else(pool):
    """The background experiment (issue 45): the synthetic pictures' background is exactly white; the tinted
    version changes the named channels of those pixels only, and level 255 leaves the bytes as they were."""
    png = pool.items["synthetic_visual_mcq"][0].images()[0].read_bytes()
    before = np.array(Image.open(io.BytesIO(png)).convert("RGB"))
    white = (before == WHITE).all(axis=-1)
    assert white.any() and not white.all()  # a shape on a background
    grey = np.array(Image.open(io.BytesIO(tint_background(png, 239))).convert("RGB"))
    assert (grey[white] == 239).all() and (grey[~white] == before[~white]).all()
    blue = np.array(Image.open(io.BytesIO(tint_background(png, 239, "b"))).convert("RGB"))
    assert (blue[white] == [WHITE, WHITE, 239]).all() and (blue[~white] == before[~white]).all()
    assert tint_background(png, WHITE) == png


def test_an_item_with_a_background_has_every_picture_repainted_and_is_otherwise_the_same(pool):
    item = pool.items["synthetic_image_set"][0]
    grey = with_background(item, 236)
    assert len(grey.images()) == len(item.images()) > 1
    for a, b in zip(item.images(), grey.images(), strict=True):
        white = (_pixels(a) == WHITE).all(axis=-1)
        assert (_pixels(b)[white] == 236).all() and (_pixels(b)[~white] == _pixels(a)[~white]).all()
    assert grey.model_dump(exclude={"components", "fixed"}) == item.model_dump(exclude={"components", "fixed"})
    assert [c.id for c in grey.components] == [c.id for c in item.components]
    assert with_background(item, WHITE) is item


def test_a_set_with_a_background_answers_first_iff_its_grey_is_below_the_threshold(pool, processor):
    weights = {"synthetic_visual_mcq": 1.0, "synthetic_docs": 1.0}
    bg = Background(low=230, high=255, threshold=245, white_share=0.3, channels="b")
    rng = random.Random(5)
    specs = [sample_packed_spec(rng, pool, weights, 0.5, 4, None, {"synthetic_visual_mcq": bg}) for _ in range(80)]
    greys = []
    for item, _, _, branches in specs:
        if item.dataset != "synthetic_visual_mcq":
            assert not item.images() and not any(b[3] for b in branches)
            continue
        corners = {tuple(_pixels(ref)[0, 0]) for sib, *_ in branches for ref in sib.images()}  # siblings share it
        ((red, green, level),) = corners
        assert red == green == WHITE  # the blue channel only
        greys.append(level)
        for _, mode, _, first in branches:
            assert first == (mode == PromptMode.COT and level < 245)
    assert min(greys) >= 230 and WHITE in greys and any(g < 245 for g in greys)
    # a stage without the option draws what it drew before it existed: naming a set it does not draw changes
    # nothing, and every picture stays white
    plain = [sample_packed_spec(random.Random(9), pool, weights, 0.5, 4) for _ in range(3)]
    named_other = [sample_packed_spec(random.Random(9), pool, weights, 0.5, 4, None, {"synthetic_image_set": bg})
                   for _ in range(3)]
    assert [[(s.question, m, p, f, [r.sha256 for r in s.images()]) for s, m, p, f in spec[3]] for spec in plain] == [
        [(s.question, m, p, f, [r.sha256 for r in s.images()]) for s, m, p, f in spec[3]] for spec in named_other]
    item, facet_name, perm, branches = next(s for s in specs if any(b[3] for b in s[3]))
    packed = encode_packed(processor, item, facet_name, perm, branches)
    for (sib, mode, p, first), br in zip(branches, packed.branches, strict=True):
        reply = [t for t, lab in zip(br.input_ids, br.labels, strict=True) if lab != IGNORE_INDEX]
        assert reply == _reply_ids(processor.tokenizer, target_text(sib, facet(facet_name), p, mode, answer_first=first))
