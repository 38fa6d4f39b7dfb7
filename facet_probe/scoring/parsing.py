"""Answer extraction and normalisation: a model's reply text to the answer it gave.

Extraction reads the instructed form first (direct mode ``Answer: X``, chain-of-thought mode
``The answer is (X).``, see `facets.prompts`); a reply in that form is ``ok``. Otherwise a short
ladder of fallbacks is tried in order, each yielding status ``fallback``:

every format
  0. the other mode's instructed form, then ``Final answer: X``;
letters (MCQ)
  0. inside an instructed span whose head is no label: ``Answer: Option B``, ``Answer: The answer is B``,
     a label in LaTeX ``Answer: $\\boxed{D}$`` / ``Answer: $D$``;
  1. a last line that is only a label, in either case: ``B``, ``(B)``, ``**B.**``, ``b``;
  2. ``Answer - B`` (a dash for the colon);
  3. exactly one distinct ``\\boxed{B}``;
  4. exactly one distinct ``answer is B`` / ``option is (B)`` (the correct answer is B.);
  5. exactly one distinct ``My answer: B`` / ``Choice: B`` / ``Correct option: (B)``: a line naming its
     answer, choice or option with a qualifier that cannot negate it (`_QUALIFIERS`: "Wrong answer: B" is
     not read);
  6. a last line that is exactly ``It is B.`` / ``So this is (B).`` (a whole-line form: "It is not B." and
     "It is B or C." are not read);
  7. exactly one distinct parenthesised capital label in the reply: ``... so (B) fits``;
  8. exactly one distinct ``option B`` / ``choice B`` in the reply;
  9. the one line that starts with a label and goes on with text: ``B) Paris``, in a reply naming no
     other parenthesised label.
free text
  1. a reply that is a single short line (at most `MAX_BARE_WORDS` words) is the answer itself.
tool names
  1. a JSON ``"name": "get_weather"`` naming exactly one offered tool;
  2. calls ``get_weather(...)`` of exactly one distinct offered tool;
  3. a last line that is only an offered name.

The last instructed answer in a reply counts (a model may revise itself); markdown emphasis is ignored.

Nothing else is read: a word is never a letter ("Answer: Carbon dioxide" is not C, "I think the answer
is A" is not option I, the article "a" is not option A), and a letter must be a displayed label. When
the instructed form is present but does not name a valid answer (``Answer: E`` with four options), the
reply is a parse error: the ladder never overrides what the model stated as its answer. Everything
that does not parse is an explicit ``parse_error``.

`LetterParser.REFERENCE` reads letters as FACET-PROBE v0.0.1 does instead (the report app's
``letter_parser=reference``; docs/compatibility.md).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from facet_probe.core.prompts import AnswerFormat, Prompt, PromptMode
from facet_probe.facets.prompts import COT_ANSWER_PREFIX, DIRECT_ANSWER_PREFIX


class ParseStatus(StrEnum):
    OK = "ok"  # the instructed form
    FALLBACK = "fallback"  # a rung of the documented fallback ladder
    PARSE_ERROR = "parse_error"  # no answer could be read


class LetterParser(StrEnum):
    """How letters are read: ours (the instructed form, then the documented ladder; a word is never a letter)
    or FACET-PROBE v0.0.1's rule, kept one switch away (the report app's ``letter_parser=reference``)."""

    OURS = "ours"
    REFERENCE = "reference"  # an Answer: line's first character, a bare last line, the first lone capital


@dataclass(frozen=True)
class ParsedAnswer:
    """What a reply answered: `answer` as displayed (a label, the free-text span, a tool name).

    `rule` names the rung that matched (e.g. ``direct``, ``lone_label``), or why nothing did.
    """

    answer: str | None
    status: ParseStatus
    rule: str

    @property
    def ok(self) -> bool:
        return self.status != ParseStatus.PARSE_ERROR


#: A bare reply (no instructed form) longer than this many words is not taken as a free-form answer.
MAX_BARE_WORDS = 8

_MARKUP = re.compile(r"[*`]+")  # markdown emphasis and code ticks around answers
_DIRECT_WORDS = re.escape(DIRECT_ANSWER_PREFIX.rstrip(":").lower())  # "answer"
_THE, *_REST = COT_ANSWER_PREFIX.lower().split()
_COT_WORDS = rf"{re.escape(_THE)}\s+(?:final\s+)?" + r"\s+".join(map(re.escape, _REST))  # the (final) answer is
# Instructed forms: the span after the prefix, up to the end of its line (a lookahead, so a later "the
# answer is" on the same line is found too). The direct form must start a line; "Final answer:" is a
# fallback only.
_SPAN = r"[ \t]*(?=(?P<span>[^\n]*))"
_DIRECT = re.compile(rf"(?im)^[ \t>#-]*{_DIRECT_WORDS}[ \t]*:{_SPAN}")
_FINAL = re.compile(rf"(?im)^[ \t>#-]*final[ \t]+{_DIRECT_WORDS}[ \t]*:{_SPAN}")
_COT = re.compile(rf"(?i)\b{_COT_WORDS}[ \t]*:?{_SPAN}")


@functools.cache
def cot_pattern(prefix: str = COT_ANSWER_PREFIX) -> re.Pattern[str]:
    """The CoT answer form for another closing sentence's lead (the attack's reference ImageNet wording
    ``The class of the image is (X).``), read as `_COT` reads ``The (final) answer is (X).``."""
    if prefix == COT_ANSWER_PREFIX:
        return _COT
    the, *rest = prefix.lower().split()
    words = rf"{re.escape(the)}\s+(?:final\s+)?" + r"\s+".join(map(re.escape, rest))
    return re.compile(rf"(?i)\b{words}[ \t]*:?{_SPAN}")


# A label token at the start of an answer span: "(B)", "[B]", or a bare "B" that is followed by the end,
# a punctuation mark or a dash (so "Carbon" and "a bird" are not labels).
_LABEL_HEAD = re.compile(
    r"^(?:\((?P<p>[A-Za-z])\)|\[(?P<b>[A-Za-z])\]|(?P<l>[A-Za-z])(?=$|[.,:;)\]!]|\s+[-\u2013\u2014]\s))")
_LONE_LABEL = re.compile(r"^[(\[]?(?P<l>[A-Za-z])[)\]]?[.!]?$")
# A label wrapped in LaTeX at the head of an answer span: "$\boxed{D}$", "\boxed{(D)}", "$D$", "\(D\)"; the
# wrapper must close right after the label ("$a = 3$" is no label).
_LATEX_LABEL = re.compile(r"^(?:\$+|\\[(\[]|\\(?:boxed|text|textbf|mathrm|mathbf)\{|[ \t])+[(\[]?(?P<l>[A-Za-z])[)\]]?"
                          r"(?:\}|\$+|\\[)\]])+(?=[ \t]*$|[ \t.,:;!])")
_PAREN_LABEL = re.compile(r"\((?P<l>[A-Z])\)")
_OPTION_LABEL = re.compile(r"(?i:\b(?:option|choice))\s+\(?(?P<l>[A-Z])\b(?!['\u2019]\w)")
_IDENT = r"[A-Za-z_][\w.]*"
# Fallback forms (status `fallback`), each reading a displayed capital label and never a word:
_LABEL_END = r"(?=[ \t]*$|[.,;:!)\]])"  # a label ends the line or meets a punctuation mark
_SPAN_OPTION = re.compile(r"^(?i:option|choice)\s+[(\[]?(?P<l>[A-Za-z])[)\]]?(?=$|[.,:;)\]!]|\s)")
_DASH = re.compile(rf"(?im)^[ \t>#-]*{_DIRECT_WORDS}[ \t]*[-\u2013\u2014]{_SPAN}")  # "Answer - B"
_BOXED_LABEL = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*\(?(?P<l>[A-Z])\)?\s*\}?\s*\}")
_ANSWER_IS_LABEL = re.compile(rf"(?im)\b(?:answer|option|choice)\s+is\s*:?\s*[(\[]?(?P<l>[A-Z])[)\]]?{_LABEL_END}")
_LABEL_LINE = re.compile(r"(?m)^[ \t]*[(\[]?(?P<l>[A-Z])[).\]:][ \t]+\S")
#: Words that may qualify "answer"/"choice"/"option" before a colon ("My answer: B"); none can negate it, so
#: "Wrong answer: B" or "Not my answer: B" is never read.
_QUALIFIERS = r"(?:my|our|the|correct|right|final|best|chosen|selected)"
_NAMED_LABEL = re.compile(
    rf"(?im)^[ \t>#-]*(?:(?:{_QUALIFIERS}[ \t]+)*(?:choice|option)|(?:{_QUALIFIERS}[ \t]+)+{_DIRECT_WORDS})[ \t]*:"
    rf"[ \t]*[(\[]?(?P<l>[A-Za-z])[)\]]?{_LABEL_END}")
# A whole last line stating the label: "It is B.", "So this is (B)." (capital label; nothing else on the line).
_IT_IS_LABEL = re.compile(r"^(?i:(?:(?:so|thus|hence|therefore),?[ \t]+)?(?:it|this|that)(?:[ \t]+is|['\u2019]s)[ \t]+"
                          r"(?:(?:option|choice)[ \t]+)?)[(\[]?(?P<l>[A-Z])[)\]]?[.!]?$")


def _clean(text: str) -> str:
    return _MARKUP.sub("", unicodedata.normalize("NFKC", text or "")).strip()


def _last_span(pattern: re.Pattern[str], text: str) -> str | None:
    """The span of the last match of an instructed-form pattern (or, when that is empty, the next
    non-empty line: "Answer:\n\nB"), or None."""
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    span = matches[-1].group("span").strip()
    if not span:
        following = [ln.strip() for ln in text[matches[-1].end("span"):].splitlines() if ln.strip()]
        span = following[0] if following else ""
    return span


def _instructed(text: str, mode: PromptMode, cot_prefix: str = COT_ANSWER_PREFIX
                ) -> list[tuple[str, str, ParseStatus]]:
    """(rule, span, status) of the instructed form, then the other mode's form and "Final answer:"."""
    direct = ("direct", _last_span(_DIRECT, text))
    cot = ("cot", _last_span(cot_pattern(cot_prefix), text))
    final = ("final_answer", _last_span(_FINAL, text))
    first, *rest = (direct, cot, final) if mode == PromptMode.DIRECT else (cot, direct, final)
    found = [(first[0], first[1], ParseStatus.OK)] if first[1] is not None else []
    found += [(rule, span, ParseStatus.FALLBACK) for rule, span in rest if span is not None]
    return found


def _strip_closing(span: str) -> str:
    """The answer inside ``(X).``: drop a trailing period and one pair of enclosing parentheses."""
    span = span.strip().rstrip(".").strip()
    if span.startswith("(") and span.endswith(")") and span.count("(") == 1:
        span = span[1:-1].strip()
    return span


def _error(rule: str) -> ParsedAnswer:
    return ParsedAnswer(None, ParseStatus.PARSE_ERROR, rule)


# --- letters -------------------------------------------------------------------------------------


def parse_letter(text: str, labels: Sequence[str], mode: PromptMode | str = PromptMode.DIRECT,
                 cot_prefix: str = COT_ANSWER_PREFIX, parser: LetterParser | str = LetterParser.OURS) -> ParsedAnswer:
    """The displayed option letter a reply chose; it must be one of `labels` (display order). `cot_prefix`:
    the lead of the instructed CoT sentence (``The answer is``; the attack's reference ImageNet prompt asks
    for ``The class of the image is (X).``). `parser`: ours, or FACET-PROBE v0.0.1's rule."""
    valid = {str(lab).upper() for lab in labels}
    if not valid or any(len(lab) != 1 or not lab.isalpha() for lab in valid):
        raise ValueError(f"option labels must be single letters, got {list(labels)}")
    if LetterParser(parser) == LetterParser.REFERENCE:
        return reference_letter(text, valid)
    text = _clean(text)
    forms = _instructed(text, PromptMode(mode), cot_prefix)
    if forms:
        rule, span, status = forms[0]
        letter, how = _span_label(span)
        if letter is None:
            return _error(f"{rule}_not_a_label")
        if letter not in valid:
            return _error(f"{rule}_label_not_displayed")
        return ParsedAnswer(letter, status, rule) if how is None else \
            ParsedAnswer(letter, ParseStatus.FALLBACK, f"{rule}_{how}")
    for rule, rung in _LETTER_LADDER:
        letter = rung(text)
        if letter is not None:
            return ParsedAnswer(letter, ParseStatus.FALLBACK, rule) if letter in valid else _error(
                f"{rule}_label_not_displayed")
    return _error("no_answer")


def _span_label(span: str) -> tuple[str | None, str | None]:
    """(letter, rung) of an answer span: a label at its head (rung None), else after "option"/"choice"
    ("Answer: Option B") or inside a repeated instructed form ("Answer: The answer is B")."""
    m = _LABEL_HEAD.match(span)
    if m:
        return (m.group("p") or m.group("b") or m.group("l")).upper(), None
    m = _SPAN_OPTION.match(span)
    if m:
        return m.group("l").upper(), "option_word"
    m = _LATEX_LABEL.match(span)
    if m:
        return m.group("l").upper(), "latex"
    inner = _last_span(_COT, span)
    m = _LABEL_HEAD.match(_strip_closing(inner) if inner else "")
    if m:
        return (m.group("p") or m.group("b") or m.group("l")).upper(), "nested"
    return None, None


def _label_line(text: str) -> str | None:
    """The label of the one line that starts with a label and goes on with text ("B) Paris"), in a reply
    that names no other label in parentheses ("(A) is wrong and (B) is right" names two)."""
    lines = [m.group("l") for m in _LABEL_LINE.finditer(text)]
    others = {m.group("l") for m in _PAREN_LABEL.finditer(text)} - set(lines)
    return lines[0] if len(lines) == 1 and not others else None


def _last_line(pattern: re.Pattern[str], text: str) -> str | None:
    """The label `pattern` reads from the reply's last non-empty line, upper-cased."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    m = pattern.match(lines[-1]) if lines else None
    return m.group("l").upper() if m else None


def _unique(matches: Sequence[str]) -> str | None:
    distinct = set(matches)
    return distinct.pop() if len(distinct) == 1 else None


def _dash_answer(text: str) -> str | None:
    span = _last_span(_DASH, text)
    m = _LABEL_HEAD.match(span) if span else None
    return (m.group("p") or m.group("b") or m.group("l")).upper() if m else None


_LETTER_LADDER: tuple[tuple[str, Callable[[str], str | None]], ...] = (
    ("lone_label", lambda t: _last_line(_LONE_LABEL, t)),
    ("answer_dash", _dash_answer),
    ("boxed_label", lambda t: _unique([m.group("l") for m in _BOXED_LABEL.finditer(t)])),
    ("answer_is_label", lambda t: _unique([m.group("l") for m in _ANSWER_IS_LABEL.finditer(t)])),
    ("named_label", lambda t: _unique([m.group("l").upper() for m in _NAMED_LABEL.finditer(t)])),
    ("it_is_label", lambda t: _last_line(_IT_IS_LABEL, t)),
    ("parenthesised_label", lambda t: _unique([m.group("l") for m in _PAREN_LABEL.finditer(t)])),
    ("option_label", lambda t: _unique([m.group("l") for m in _OPTION_LABEL.finditer(t)])),
    ("label_line", _label_line),
)


_REF_ANSWER_LINE = re.compile(r"(?i)(?:final\s+)?answer\s*[:-]")
_REF_LAST_LINE = re.compile(r"^\(?(?P<l>[A-Z])\)?(?:[.)\s]|$)")
_REF_ANY = re.compile(r"\b(?P<l>[A-Z])\b")


def reference_letter(text: str, valid: set[str]) -> ParsedAnswer:
    """FACET-PROBE v0.0.1's reading of a letter (`LetterParser.REFERENCE`): the first character after an
    ``Answer:`` / ``Final answer -`` line's head that is a valid letter ("Answer: Carbon" is C), else the
    last line when it is one letter or opens with one ("(B) ..."), else the first lone capital letter
    anywhere, if valid ("I think..." is I). Status ``ok`` for an Answer line, else ``fallback``."""
    text = (text or "").strip()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        head = _REF_ANSWER_LINE.match(line.lstrip())
        if head is None:
            continue
        rest = "\n".join([line.lstrip()[head.end():], *lines[i + 1:]]).strip().upper()
        if rest[:1] in valid:
            return ParsedAnswer(rest[:1], ParseStatus.OK, "reference_answer_line")
    last = [ln.strip().upper() for ln in lines if ln.strip()]
    m = _REF_LAST_LINE.match(last[-1]) if last else None
    if m and m.group("l") in valid:
        return ParsedAnswer(m.group("l"), ParseStatus.FALLBACK, "reference_last_line")
    m = _REF_ANY.search(text.upper())
    if m and m.group("l") in valid:
        return ParsedAnswer(m.group("l"), ParseStatus.FALLBACK, "reference_first_capital")
    return _error("reference_no_answer")


# --- free text -----------------------------------------------------------------------------------


def parse_free(text: str, mode: PromptMode | str = PromptMode.DIRECT) -> ParsedAnswer:
    """The free-form answer span of a reply (not yet normalised: see `normalize_free`)."""
    text = _clean(text)
    forms = _instructed(text, PromptMode(mode))
    if forms:
        rule, span, status = forms[0]
        span = _strip_closing(span)
        return ParsedAnswer(span, status, rule) if span else _error(f"{rule}_empty")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) == 1 and len(lines[0].split()) <= MAX_BARE_WORDS:
        return ParsedAnswer(_strip_closing(lines[0]), ParseStatus.FALLBACK, "bare_reply")
    return _error("no_answer")


_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
          "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_NUMBER_WORDS = {w: i for i, w in enumerate(_UNITS)} | {w: 10 * (i + 2) for i, w in enumerate(_TENS)}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+)(?![\d,])")
_LEAD = re.compile(rf"^(?:(?:final[ \t]+)?{_DIRECT_WORDS}[ \t]*:|{_COT_WORDS}[ \t]*:?)\s*")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _canonical_number(token: str) -> str:
    """"2.0" -> "2", "0.50" -> "0.5", "-0" -> "0"; other tokens unchanged."""
    try:
        value = Decimal(token)
    except InvalidOperation:
        return token
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _number_word_kind(tok: str) -> str | None:
    if tok in _SCALES:
        return "hundred" if tok == "hundred" else "scale"
    value = _NUMBER_WORDS.get(tok)
    if value is None:
        return None
    return "unit" if value < 10 else "teen" if value < 20 else "tens"


#: Which kind of number word may follow which inside one number ("twenty one", "two hundred five").
_NUMBER_FOLLOWS: dict[str, set[str | None]] = {
    "unit": {None, "tens", "hundred", "scale"},
    "teen": {None, "hundred", "scale"},
    "tens": {None, "hundred", "scale"},
    "hundred": {"unit", "teen"},
    "scale": {"unit", "teen", "tens", "hundred"},
}


def _words_to_numbers(tokens: list[str]) -> list[str]:
    """Replace each run of number words ("twenty one", "two hundred five") by its digits; "one two"
    stays two numbers."""
    out: list[str] = []
    total = current = 0
    last: str | None = None
    for tok in [*tokens, ""]:
        kind = _number_word_kind(tok)
        if last is not None and (kind is None or last not in _NUMBER_FOLLOWS[kind]):
            out.append(str(total + current))
            total, current, last = 0, 0, None
        if kind is None or last not in _NUMBER_FOLLOWS[kind]:  # a plain word ("hundred" alone too)
            if tok:
                out.append(tok)
            continue
        if kind == "hundred":
            current *= 100
        elif kind == "scale":
            total, current = total + current * _SCALES[tok], 0
        else:
            current += _NUMBER_WORDS[tok]
        last = kind
    return out


#: Edge characters stripped from a free-form answer: the reference's set (space . ' " `) and the sentence
#: marks , ; : ! ? that end a reply's answer line. Punctuation inside an answer is kept ("u.s.a").
_EDGE = " .'\"`,;:!?"
_LEADING_ARTICLE = re.compile(r"^(?:a|an|the)\s+")
_NUMBER = re.compile(r"^-?(?:\d+(?:\.\d+)?|\.\d+)$")


def normalize_free(text: str | None) -> str:
    """Canonical form of a short free-form answer, for exact match (applied to gold and answer alike).

    What FACET-PROBE v0.0.1 strips, and no more: lower case, a leading "answer:" / "the answer is",
    whitespace collapsed, edge punctuation (`_EDGE`), then one leading article ("the eiffel tower" ==
    "eiffel tower", but "vitamin a" keeps its "a" and the gold "A" stays "a"). On top, numbers are compared
    as numbers: NFKC, ``\\boxed{x}`` unwrapped, thousands separators dropped, "2.0" == "2", number words as
    digits ("two" == "2", "twenty-one" == "21"). Documented in docs/compatibility.md.
    """
    text = unicodedata.normalize("NFKC", text or "").lower().strip()
    text = _LEAD.sub("", _BOXED.sub(r"\1", text))
    text = _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), text)
    text = _LEADING_ARTICLE.sub("", _strip_edges(" ".join(text.split())))
    tokens = [part for tok in text.split(" ") for part in _number_word_parts(tok)]
    tokens = _words_to_numbers([t for t in tokens if t])
    return " ".join(_canonical_number(t) if _NUMBER.match(t) else t for t in tokens)


def _strip_edges(text: str) -> str:
    """`_EDGE` characters off both ends, except the point of a leading decimal (".5")."""
    text = text.rstrip(_EDGE)
    head = text.lstrip(_EDGE)
    if head[:1].isdigit() and text[:len(text) - len(head)].endswith("."):
        return "." + head
    return head


def _number_word_parts(token: str) -> list[str]:
    """'twenty-one' -> ['twenty', 'one'] (a hyphen between number words); any other token unchanged."""
    parts = token.split("-")
    if len(parts) > 1 and all(_number_word_kind(p) for p in parts):
        return parts
    return [token]


# --- tool names ----------------------------------------------------------------------------------


def parse_tool(text: str, tools: Sequence[str], mode: PromptMode | str = PromptMode.DIRECT) -> ParsedAnswer:
    """The offered function a reply chose (a call ``get_weather(city=...)`` yields ``get_weather``)."""
    offered = {t.lower(): t for t in tools}
    if not offered:
        raise ValueError("parse_tool needs the offered tool names")
    text = unicodedata.normalize("NFKC", text or "").strip()
    forms = _instructed(text.replace("`", "").replace("*", ""), PromptMode(mode))
    if forms:
        rule, span, status = forms[0]
        names = {offered[w] for w in _idents(span) if w in offered}
        if len(names) == 1:
            return ParsedAnswer(names.pop(), status, rule)
        return _error(f"{rule}_ambiguous_tools" if names else f"{rule}_no_offered_tool")
    for rule, pattern in _TOOL_LADDER:
        name = _unique([offered[w] for w in _idents(text, pattern) if w in offered])
        if name is not None:
            return ParsedAnswer(name, ParseStatus.FALLBACK, rule)
    lines = [ln.strip().strip("`*").strip() for ln in text.splitlines() if ln.strip()]
    if lines and lines[-1].rstrip(".").lower() in offered:
        return ParsedAnswer(offered[lines[-1].rstrip(".").lower()], ParseStatus.FALLBACK, "lone_name")
    return _error("no_answer")


def _idents(text: str, pattern: re.Pattern[str] = re.compile(f"({_IDENT})")) -> list[str]:
    """Identifiers captured by `pattern`, lower-cased, without a sentence's trailing period."""
    return [w.rstrip(".").lower() for w in pattern.findall(text)]


_TOOL_LADDER: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("json_name", re.compile(rf"[\"']name[\"']\s*:\s*[\"']({_IDENT})[\"']")),
    ("call", re.compile(rf"\b({_IDENT})\s*\(")),
)


# --- dispatch ------------------------------------------------------------------------------------


def parse_answer(prompt: Prompt, text: str, tools: Sequence[str] = ()) -> ParsedAnswer:
    """Parse a reply to `prompt` according to its answer format, mode and displayed labels."""
    fmt = AnswerFormat(prompt.answer_format)
    if fmt == AnswerFormat.LETTER:
        return parse_letter(text, prompt.labels, prompt.mode)
    if fmt == AnswerFormat.TOOL:
        return parse_tool(text, tools, prompt.mode)
    return parse_free(text, prompt.mode)
