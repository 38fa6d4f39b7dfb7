"""Where the answer, the rationale and the answer template are, in characters and then in tokens.

Everything is found by reading and tokenising text, never by fixed row indices, so any tokenizer works
(the published code hard-codes positions for one tokenizer):

1. `locate_answer(text, labels, mode)`: the core parser (`scoring.parsing.parse_letter`) says which letter a reply
   gave and by which rule; we then find that answer in the raw text: the letter's character and the start
   of the answer sentence (``The answer is (X).`` in CoT, the ``Answer: X`` line in direct mode). The
   rationale is the text before the answer sentence.
2. `token_offsets(tokenizer, text)`: token ids of `text` (as the adapters tokenise a target: no special
   tokens) with each token's character range, from the fast tokenizer's offset mapping or, for a slow
   tokenizer, by decoding growing prefixes.
3. `letter_slot(...)`: the token that holds the answer letter, and for each displayed label the token id
   that slot takes when that label is written there (re-tokenising the text with the label substituted;
   a tokenizer that merges the letter with its neighbours, e.g. "(B", still yields a comparable id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from facet_probe.core.prompts import PromptMode
from facet_probe.facets.prompts import COT_ANSWER_PREFIX, DIRECT_ANSWER_PREFIX
from facet_probe.scoring.parsing import ParseStatus, cot_pattern, parse_letter


class SpanError(ValueError):
    """A span could not be located in the text or its tokens (the message says which and why)."""


# The instructed forms, as the core parser reads them (facets.prompts holds the wording); the CoT form's
# lead is the sample's (`The answer is`, or the reference ImageNet wording `The class of the image is`).
_DIRECT_WORD = re.escape(DIRECT_ANSWER_PREFIX.rstrip(":").lower())
_DIRECT_RE = re.compile(rf"(?im)^[ \t>#*-]*(?:final[ \t]+)?{_DIRECT_WORD}[ \t*]*:")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


@dataclass(frozen=True)
class AnswerLocation:
    """The answer a reply gave and where: `letter_char` indexes the letter in the text, `sentence_start`
    the start of the answer sentence (so the rationale is ``text[:sentence_start]``)."""

    answer: str | None
    status: ParseStatus
    rule: str
    letter_char: int | None = None
    sentence_start: int | None = None

    @property
    def found(self) -> bool:
        return self.letter_char is not None


def locate_answer(text: str, labels: Sequence[str], mode: PromptMode | str,
                  prefix: str = COT_ANSWER_PREFIX) -> AnswerLocation:
    """The parsed answer and its position in `text` (positions None when it cannot be pinned down);
    `prefix`: the lead of the CoT answer sentence."""
    parsed = parse_letter(text, labels, mode, prefix)
    if parsed.answer is None:
        return AnswerLocation(None, parsed.status, parsed.rule)
    letter = parsed.answer
    if parsed.rule == "cot":
        matches = list(cot_pattern(prefix).finditer(text))
    elif parsed.rule in ("direct", "final_answer"):
        matches = list(_DIRECT_RE.finditer(text))
    else:
        matches = []
    if matches:
        m = matches[-1]
        line_end = text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        hit = re.compile(rf"(?<![A-Za-z]){letter}(?![A-Za-z])", re.IGNORECASE).search(text, m.end(), line_end)
        if hit is not None:
            return AnswerLocation(letter, parsed.status, parsed.rule, hit.start(), m.start())
    # a fallback rung (lone label, "(B)" once, "option B"): the last standalone occurrence of the letter
    hits = list(re.finditer(rf"(?<![A-Za-z]){letter}(?![A-Za-z])", text))
    if not hits:
        return AnswerLocation(letter, parsed.status, parsed.rule)
    pos = hits[-1].start()
    return AnswerLocation(letter, parsed.status, parsed.rule, pos, text.rfind("\n", 0, pos) + 1)


def rationale_of(text: str, loc: AnswerLocation) -> str:
    """The text before the answer sentence (the whole reply when no answer was found)."""
    if loc.sentence_start is None:
        return text.strip()
    return text[:loc.sentence_start].strip()


def answer_in_first_sentence(text: str, loc: AnswerLocation, prefix: str = COT_ANSWER_PREFIX) -> bool:
    """Whether the reply states its answer in its first sentence, i.e. without reasoning first.

    The earliest instructed answer form counts ("The answer is (B). Because ..." answers first even though
    the parser reads the last form); a reply answered only by a fallback rung uses its located answer."""
    if loc.answer is None or loc.sentence_start is None:
        return False
    starts = [m.start() for pattern in (cot_pattern(prefix), _DIRECT_RE) for m in [pattern.search(text)] if m]
    start = min(starts) if starts else loc.sentence_start
    end = _SENTENCE_END.search(text, len(text) - len(text.lstrip()))
    return start <= (end.start() if end else len(text))


# --- tokens ------------------------------------------------------------------------------------------------

def token_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids of `text` without special tokens and each token's [start, end) character range."""
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [(int(a), int(b)) for a, b in enc["offset_mapping"]]
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return ids, offsets_by_decoding(tokenizer, ids, text)


def offsets_by_decoding(tokenizer, ids: Sequence[int], text: str) -> list[tuple[int, int]]:
    """Character ranges of `ids` in `text` from decoding growing prefixes (any tokenizer).

    Decoded prefixes are aligned to `text` with whitespace ignored, so a decoder that drops or adds a
    leading space still maps; a token that decodes to nothing gets an empty range."""
    def skeleton_index(s: str) -> list[int]:  # positions of non-space characters
        return [i for i, ch in enumerate(s) if not ch.isspace()]

    text_pos = skeleton_index(text)
    offsets, prev_chars = [], 0
    for k in range(1, len(ids) + 1):
        decoded = tokenizer.decode(list(ids[:k]), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        chars = len(skeleton_index(decoded))
        if chars > len(text_pos):
            raise SpanError("the tokenizer does not decode its own tokens back to the text")
        start = text_pos[prev_chars] if prev_chars < chars else (text_pos[prev_chars - 1] + 1 if prev_chars else 0)
        end = text_pos[chars - 1] + 1 if chars else 0
        offsets.append((start, max(start, end)))
        prev_chars = chars
    return offsets


def token_at(offsets: Sequence[tuple[int, int]], char: int) -> int:
    """Index of the token whose range holds character `char`."""
    for i, (a, b) in enumerate(offsets):
        if a <= char < b:
            return i
    raise SpanError(f"no token covers character {char}")


def tokens_before(offsets: Sequence[tuple[int, int]], char: int) -> list[int]:
    """Indices of the non-empty tokens that end at or before character `char`."""
    return [i for i, (a, b) in enumerate(offsets) if b <= char and b > a]


@dataclass(frozen=True)
class LetterSlot:
    """The token holding the answer letter (`index` into the text's tokens) and, per label, its id there."""

    index: int
    ids: dict[str, int]


def letter_slot(tokenizer, text: str, letter_char: int, labels: Sequence[str],
                optional: Sequence[str] = ()) -> LetterSlot:
    """The answer letter's token, and the token each of `labels` (and of `optional`) would put in that slot.

    Each label is written in place of the letter and the text re-tokenised; the tokens before the slot
    must not change (the logits predicting the slot see only them), else the slot is ambiguous: a SpanError
    for one of `labels`, left out for one of `optional` (a letter the tokenizer merges differently, which
    matters only to a loss that reads it)."""
    ids, offsets = token_offsets(tokenizer, text)
    k = token_at(offsets, letter_char)
    out: dict[str, int] = {}
    for label in dict.fromkeys([*labels, *optional]):
        alt = text[:letter_char] + label + text[letter_char + 1:]
        alt_ids, alt_offsets = token_offsets(tokenizer, alt)
        if alt_ids[:k] != ids[:k] or len(alt_ids) <= k or token_at(alt_offsets, letter_char) != k:
            if label not in labels:
                continue
            raise SpanError(f"writing {label!r} in place of the answer letter re-tokenises the text before it; "
                            f"cannot compare letters in one slot (text {text!r})")
        out[label] = alt_ids[k]
    return LetterSlot(k, out)


def template_tokens(tokenizer, letter: str, end_ids: Sequence[int] = (),
                    prefix: str = COT_ANSWER_PREFIX) -> list[tuple[int, int]]:
    """The reference's stop-reasoning target: ``(index in the reply, token id)`` of ``The answer is (X).``
    followed by the tokens that end the reply, `end_ids` (`objectives.base.end_of_reply_ids`: the family's end
    of turn as tokenised after the template), the letter slot left out.

    The indices are those the tokens take in a reply that starts with the template, so the tokens after
    the letter (``).`` and the end of turn) are pulled one position past the slot, as the reference's
    ``cat(logits[:4], logits[5:8])`` does for its tokenizer (``cat(logits[:7], logits[8:10])`` for its
    ImageNet wording ``The class of the image is (X).``, `prefix`)."""
    text, letter_char = answer_template(letter, prefix)
    ids, _ = token_offsets(tokenizer, text)
    slot = letter_slot(tokenizer, text, letter_char, (letter,)).index
    pairs = [(i, t) for i, t in enumerate(ids) if i != slot]
    return pairs + [(len(ids) + k, int(t)) for k, t in enumerate(end_ids)]


def answer_template(letter: str, prefix: str = COT_ANSWER_PREFIX) -> tuple[str, int]:
    """The CoT answer sentence for `letter` (``The answer is (X).``, or another `prefix`) and the letter's
    character index."""
    text = f"{prefix} ({letter})."
    return text, text.index("(" + letter) + 1
