"""Training examples: real renderers, random orderings, both modes, loss only on the assistant reply."""

from __future__ import annotations

import random

import pytest

from facet_probe.facets.prompts import COT_ANSWER_TEMPLATE
from facet_probe.prompts import PromptMode
from facet_probe.scoring import score
from facet_probe.tiny_vlm.architecture import TinyVLMSpec, build_processor
from facet_probe.tiny_vlm.data import (
    IGNORE_INDEX,
    Pool,
    available_sets,
    collate,
    encode_example,
    encode_prompt,
    example_stream,
    facet,
    random_permutation,
    sample_spec,
    target_text,
    tokenizer_corpus,
)
from facet_probe.tiny_vlm.tokenizer import IMAGE_TOKEN, prompt_phrases, train_tokenizer


@pytest.fixture(scope="module")
def pool():
    return Pool.load(available_sets(), n_per_set=8)


@pytest.fixture(scope="module")
def processor(pool):
    tok = train_tokenizer(tokenizer_corpus(pool, seed=0), vocab_size=600, phrases=prompt_phrases())
    return build_processor(TinyVLMSpec(), tok)


def test_all_nine_sets_from_the_train_split(pool):
    assert len(pool.items) == 9
    for name, items in pool.items.items():
        assert all(it.metadata["split"] == "train" for it in items), name
        assert pool.facets[name], name


def test_labels_cover_exactly_the_reply_and_eos(pool, processor):
    tok = processor.tokenizer
    rng = random.Random(0)
    for name, items in pool.items.items():
        item = items[0]
        fct_name = pool.facets[name][0]
        perm = random_permutation(rng, len(facet(fct_name).orderables(item)))
        for mode in PromptMode:
            ex = encode_example(processor, item, fct_name, perm, mode)
            prompt_ids, _ = encode_prompt(processor, facet(fct_name).render(item, perm, mode))
            assert ex.input_ids[: len(prompt_ids)] == prompt_ids  # the runner's prompt, unchanged
            assert all(label == IGNORE_INDEX for label in ex.labels[: ex.prompt_len])
            reply = ex.labels[ex.prompt_len:]
            assert IGNORE_INDEX not in reply and reply == ex.input_ids[ex.prompt_len:]
            assert reply[-1] == tok.eos_token_id
            assert tok.decode(reply[:-1]) == target_text(item, facet(fct_name), perm, mode)
            n_images = len(item.images())
            assert ex.input_ids.count(tok.convert_tokens_to_ids(IMAGE_TOKEN)) == 16 * n_images
            assert (ex.pixel_values is None) == (n_images == 0)


def test_targets_are_correct_answers_in_the_instructed_form(pool):
    rng = random.Random(0)
    for name, items in pool.items.items():
        fct = facet(pool.facets[name][0])
        for item in items:
            perm = random_permutation(rng, len(fct.orderables(item)))
            for mode in PromptMode:
                prompt = fct.render(item, perm, mode)
                text = target_text(item, fct, perm, mode)
                s = score(item, fct, perm, prompt, text)
                assert s.correct and s.parse_status == "ok", (name, text, s)
                if mode == PromptMode.COT:
                    rationale, _, _ = text.rpartition(" The answer is (")
                    assert rationale and text.endswith(").")
                    assert 1 <= rationale.count(".") <= 2, text
                else:
                    assert text.startswith("Answer: ")
    assert COT_ANSWER_TEMPLATE == "The answer is ({answer})."


def test_orderings_and_modes_are_drawn_not_fixed(pool):
    rng = random.Random(3)
    weights = {name: 1.0 for name in pool.items}
    specs = [sample_spec(rng, pool, weights, p_cot=0.5) for _ in range(300)]
    assert {m for *_, m in specs} == set(PromptMode)
    assert {it.dataset for it, *_ in specs} == set(pool.items)
    perms = [p for _, _, p, _ in specs]
    assert sum(p == tuple(range(len(p))) for p in perms) < 0.3 * len(perms)  # identity not favoured


def test_collate_pads_right_and_concatenates_images(pool, processor):
    stream = example_stream(processor, pool, {n: 1.0 for n in pool.items}, seed=0)
    examples = [next(stream) for _ in range(12)]
    batch = collate(examples, processor.tokenizer.pad_token_id)
    assert batch["input_ids"].shape == (12, max(len(e) for e in examples))
    assert int(batch["attention_mask"].sum()) == sum(len(e) for e in examples)
    n_images = sum(0 if e.pixel_values is None else e.pixel_values.shape[0] for e in examples)
    if n_images:
        assert batch["pixel_values"].shape == (n_images, 3, 64, 64)
