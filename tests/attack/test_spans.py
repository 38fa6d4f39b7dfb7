"""Answer, rationale and template spans are found by reading and tokenising text, for any tokenizer."""

from __future__ import annotations

import random

import pytest
from helpers import samples

from facet_probe.attack.objectives.base import forced_reply, forced_template
from facet_probe.attack.spans import (
    SpanError,
    answer_in_first_sentence,
    letter_slot,
    locate_answer,
    offsets_by_decoding,
    rationale_of,
    token_offsets,
    tokens_before,
)
from facet_probe.core.prompts import PromptMode

LABELS = ("A", "B", "C", "D")
COT, DIRECT = PromptMode.COT, PromptMode.DIRECT


@pytest.mark.parametrize(("text", "mode", "answer", "rationale", "first"), [
    ("It is red. The answer is (B).", COT, "B", "It is red.", False),
    ("The answer is (C).", COT, "C", "", True),
    ("  The answer is (C). Because it is round.", COT, "C", "", True),
    ("Because it is round, the answer is (D).", COT, "D", "Because it is round,", True),
    ("Red. So **the answer is (A)**.", COT, "A", "Red. So **", False),
    ("It is red.\nAnswer: B", COT, "B", "It is red.", False),  # the other mode's form (a fallback)
    ("Answer: D", DIRECT, "D", "", True),
    ("I pick\n(B)", COT, "B", "I pick", False),  # lone label rung (a line break ends a sentence)
    ("No idea.", COT, None, "No idea.", False),
    ("The answer is (E).", COT, None, "The answer is (E).", False),  # not a displayed label
])
def test_replies_are_read_with_the_core_parser_and_located_in_the_raw_text(text, mode, answer, rationale, first):
    loc = locate_answer(text, LABELS, mode)
    assert loc.answer == answer
    assert rationale_of(text, loc) == rationale
    assert answer_in_first_sentence(text, loc) is first
    if answer is not None:
        assert text[loc.letter_char] == answer


def test_the_last_instructed_answer_is_the_one_located():
    text = "The answer is (A). No wait, the answer is (C)."
    loc = locate_answer(text, LABELS, COT)
    assert loc.answer == "C" and loc.letter_char == text.rindex("C") and answer_in_first_sentence(text, loc)


def metaspace_tokenizer():
    """A SentencePiece-style (Metaspace, Unigram) tokenizer trained on the spot: pieces like '▁(B' or ')."'."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    words = ["it", "is", "red", "blue", "green", "yellow", "round", "square", "the", "answer", "because", "so", "shape", "colour"]
    corpus = [" ".join(rng.choice(words) for _ in range(6)).capitalize() + f", so. The answer is ({rng.choice('ABCD')})."
              f"\nAnswer: {rng.choice('ABCD')}" for _ in range(3000)]
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(corpus, trainers.UnigramTrainer(vocab_size=120, special_tokens=["<unk>"],
                                                            unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


class SlowView:
    """A tokenizer seen as slow (no offset mapping): offsets come from decoding prefixes."""

    is_fast = False

    def __init__(self, tok):
        self.tok = tok

    def __call__(self, text, **kw):
        kw.pop("return_offsets_mapping", None)
        return self.tok(text, **kw)

    def decode(self, ids, **kw):
        return self.tok.decode(ids, **kw)


@pytest.fixture(params=["llava", "qwen", "metaspace", "metaspace_slow"])
def tokenizer(request):
    if request.param == "metaspace":
        return metaspace_tokenizer()
    if request.param == "metaspace_slow":
        return SlowView(metaspace_tokenizer())
    return request.getfixturevalue(request.param).tokenizer


@pytest.mark.parametrize("text", ["It is red. The answer is (B).", "Because it is round, the answer is (D).",
                                  "Answer: C"])
def test_token_spans_cover_the_letter_and_the_rationale(tokenizer, text):
    mode = DIRECT if text.startswith("Answer") else COT
    loc = locate_answer(text, LABELS, mode)
    ids, offsets = token_offsets(tokenizer, text)
    assert len(ids) == len(offsets)
    # the tiny byte-level BPE has " A" and " C" but splits " B" (see the next test): compare A and C there
    labels = ("A", "C", loc.answer) if mode == DIRECT else LABELS
    slot = letter_slot(tokenizer, text, loc.letter_char, labels)
    a, b = offsets[slot.index]
    assert a <= loc.letter_char < b and ids[slot.index] == slot.ids[loc.answer]
    assert len(set(slot.ids.values())) == len(set(labels))  # each letter has its own token in the slot
    for label, tid in slot.ids.items():
        assert label in tokenizer.decode([tid])
    before = tokens_before(offsets, loc.sentence_start)
    assert tokenizer.decode([ids[i] for i in before]).strip() == rationale_of(text, loc)


def test_a_letter_that_tokenises_apart_cannot_share_the_slot(llava):
    with pytest.raises(SpanError, match="re-tokenises"):  # "Answer: C" -> " C" but "Answer: B" -> " ", "B"
        letter_slot(llava.tokenizer, "Answer: C", 8, ("C", "B"))
    # an option letter only a plug-in's loss may read is left out instead; the scored letter is kept
    assert set(letter_slot(llava.tokenizer, "Answer: C", 8, ("C",), optional=("B", "C")).ids) == {"C"}


def test_offsets_from_decoding_match_the_fast_offsets():
    tok = metaspace_tokenizer()
    text = "It is red. The answer is (B)."
    ids, fast = token_offsets(tok, text)
    slow = offsets_by_decoding(tok, ids, text)
    # the fast mapping gives '▁' pieces the space before them; decoding does not: compare the covered letters
    assert [text[a:b].strip() for a, b in fast] == [text[a:b].strip() for a, b in slow]


def test_a_slot_that_changes_with_the_letter_is_an_error():
    class Merging(SlowView):  # "(B" is one token but "(A" is two
        def __call__(self, text, **kw):
            pieces = text.replace("(B", "\x00").split("(")
            ids = []
            for i, p in enumerate(pieces):
                if i:
                    ids.append(ord("("))
                ids += [1000 if ch == "\x00" else ord(ch) for ch in p]
            return {"input_ids": ids}

        def decode(self, ids, **kw):
            return "".join("(B" if i == 1000 else chr(i) for i in ids)

    with pytest.raises(SpanError, match="re-tokenises"):
        letter_slot(Merging(None), "The answer is (B).", 15, LABELS)


@pytest.mark.parametrize("family", ["llava", "qwen"])
def test_forced_sequences_on_real_adapters_name_the_right_tokens(request, family):
    runner = request.getfixturevalue(family)
    (sample,) = samples(1)
    reply = f"It is round. The answer is ({sample.gold})."
    forced = forced_reply(runner, sample, reply)
    ids = forced.encoded.input_ids
    nxt = [int(ids[p + 1]) for p in forced.positions]  # the token each logits row predicts
    decode = runner.tokenizer.decode
    assert decode([nxt[r] for r in forced.rationale_rows]).strip() == "It is round."
    assert sample.gold in decode([nxt[forced.answer_row]])
    assert nxt[forced.answer_row] == forced.answer_ids[sample.gold]
    assert forced.encoded.input_ids[:forced.encoded.target_span[0]].tolist() == \
        runner.encode(sample.prompt).input_ids.tolist()

    template = forced_template(runner, sample)
    nxt = [int(template.encoded.input_ids[p + 1]) for p in template.positions]
    assert decode([nxt[r] for r in template.template_rows]) == "The answer is ("
    assert template.template_ids == [nxt[r] for r in template.template_rows]
    assert template.rationale_rows == [] and template.answer_row == len(template.positions) - 1


def test_a_reply_without_an_answer_gives_no_forced_sequence(llava):
    (sample,) = samples(1)
    assert forced_reply(llava, sample, "I cannot tell.") is None
