"""The tiny VLM's tokenizer: byte-level round trip, one token per fixed prompt sentence, chat template."""

from __future__ import annotations

import random

import pytest

from facet_probe.core.prompts import PromptMode
from facet_probe.facets import prompts as P
from facet_probe_dev.tiny_vlm.data import (
    facet,
    random_permutation,
    target_text,
)
from facet_probe_dev.tiny_vlm.tokenizer import (
    ASSISTANT_TAG,
    IMAGE_TOKEN,
    SPECIAL_TOKENS,
    option_markers,
)

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)


@pytest.fixture(scope="module")
def tok(processor):
    """The session's tokenizer (conftest: vocab 600, trained on the session's pool of every set)."""
    return processor.tokenizer


def test_round_trip_of_every_rendered_prompt_and_reply(pool, tok):
    rng = random.Random(1)
    for name, items in pool.items.items():
        fct = facet(pool.facets[name][0])
        for item in items:
            perm = random_permutation(rng, len(fct.orderables(item)))
            for mode in PromptMode:
                prompt = fct.render(item, perm, mode)
                for text in [prompt.system, *(m.text() for m in prompt.messages),
                             target_text(item, fct, perm, mode)]:
                    ids = tok(text, add_special_tokens=False)["input_ids"]
                    assert tok.decode(ids) == text
                    assert tok.unk_token_id not in ids


def test_unseen_text_round_trips_byte_level(tok):
    text = "Zürich — ünseen wörds, 12345 & {json: true}\n\n\tend"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_fixed_sentences_are_single_tokens(tok):
    for phrase in (P.SYSTEM_PROMPT, *P.DIRECT_INSTRUCTIONS.values(), *P.COT_INSTRUCTIONS.values()):
        assert len(tok(phrase, add_special_tokens=False)["input_ids"]) == 1
    # the answer templates stay ordinary text (the attack suite locates them by tokenising)
    assert len(tok("The answer is (B).", add_special_tokens=False)["input_ids"]) > 3


def test_each_option_line_starts_with_one_token_and_its_content_follows_unchanged(tok):
    """"\\nB." is one token, so the option's content token sits right after its letter's token; the
    content is tokenised as anywhere else (" kite" in an option and in a rationale are the same token)."""
    assert [m.strip() for m in option_markers(4)] == ["A.", "B.", "C.", "D."]
    text = "Question: Which one?\nA. kite\nB. red\n\nReply"
    tokens = tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
    a, b = tokens.index("\nA."), tokens.index("\nB.")
    assert tokens[a + 1: b] == tok.convert_ids_to_tokens(tok(" kite", add_special_tokens=False)["input_ids"])
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    assert tok.convert_ids_to_tokens(tok("The answer is (B).", add_special_tokens=False)["input_ids"])[-2:] == ["B", ")."]


def test_special_tokens_and_no_automatic_bos(tok):
    for t in SPECIAL_TOKENS:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1
    assert tok("hello")["input_ids"] == tok("hello", add_special_tokens=False)["input_ids"]


def test_chat_template_keeps_images_at_their_slots_and_ends_with_generation_prompt(tok):
    msgs = [{"role": "system", "content": "SYS"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"},
                                         {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "reply"}]},
            {"role": "user", "content": "q"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == (f"<s><|system|>\nSYS\n<|user|>\na{IMAGE_TOKEN}b\n{ASSISTANT_TAG}\nreply</s>\n"
                    f"<|user|>\nq\n{ASSISTANT_TAG}\n")
