"""Answer parsing: the instructed forms, the documented fallback ladder, and what is never read."""

from __future__ import annotations

import pytest

from facet_probe.core.prompts import AnswerFormat, Message, Prompt, PromptMode, TextPart
from facet_probe.facets.prompts import format_answer
from facet_probe.scoring.parsing import (
    ParseStatus,
    normalize_free,
    parse_answer,
    parse_free,
    parse_letter,
    parse_tool,
)

D, C = PromptMode.DIRECT, PromptMode.COT
OK, FB, ERR = ParseStatus.OK, ParseStatus.FALLBACK, ParseStatus.PARSE_ERROR
ABCD = ("A", "B", "C", "D")
TEN = tuple("ABCDEFGHIJ")

# (reply, mode, labels, expected letter, expected status)
LETTER_CASES = [
    # the instructed forms
    ("Answer: B", D, ABCD, "B", OK),
    ("The capital is Paris.\nAnswer: C", D, ABCD, "C", OK),
    ("Answer: (D)", D, ABCD, "D", OK),
    ("**Answer:** B", D, ABCD, "B", OK),
    ("Answer: C. Carbon dioxide", D, ABCD, "C", OK),
    ("Answer: C) Carbon dioxide", D, ABCD, "C", OK),
    ("answer: b", D, ABCD, "B", OK),
    ("Answer:\n\nB", D, ABCD, "B", OK),
    ("Answer: A\nWait, let me reconsider.\nAnswer: D", D, ABCD, "D", OK),
    ("Plants absorb it. The answer is (C).", C, ABCD, "C", OK),
    ("The answer is C.", C, ABCD, "C", OK),
    ("I think the answer is A", C, TEN, "A", OK),
    ("One might say the answer is (A), but no. The answer is (B).", C, ABCD, "B", OK),
    ("**The answer is (B).**", C, ABCD, "B", OK),
    ("The answer is: (D)", C, ABCD, "D", OK),
    ("So, the final answer is (A).", C, ABCD, "A", OK),
    # the other mode's form and "Final answer:" are fallbacks
    ("The answer is (B).", D, ABCD, "B", FB),
    ("I think the answer is A", D, TEN, "A", FB),
    ("Reasoning...\nAnswer: B", C, ABCD, "B", FB),
    ("Final Answer: C", D, ABCD, "C", FB),
    ("The final answer is (D).", D, ABCD, "D", FB),
    # the ladder
    ("B", D, ABCD, "B", FB),
    ("After weighing the options:\n(C)", D, ABCD, "C", FB),
    ("**D.**", D, ABCD, "D", FB),
    ("Only (B) is consistent with the figure.", D, ABCD, "B", FB),
    ("I would pick option D here.", D, ABCD, "D", FB),
    ("Choice A fits best", D, ABCD, "A", FB),
    # words are never letters
    ("Answer: Carbon dioxide", D, ABCD, None, ERR),
    ("Answer: A bird", D, ABCD, None, ERR),
    ("The answer is a bird.", C, ABCD, None, ERR),
    ("I think it is a cat.", D, ABCD, None, ERR),
    ("I believe Paris is the capital.", D, TEN, None, ERR),
    ("A is tempting, but I am unsure.", D, ABCD, None, ERR),
    ("The choice I'd make is unclear.", D, TEN, None, ERR),
    # ambiguous or out-of-range answers
    ("(A) is wrong and (B) is right", D, ABCD, None, ERR),
    ("Either option A or option C.", D, ABCD, None, ERR),
    ("Answer: A or B", D, ABCD, None, ERR),
    ("Answer: E", D, ABCD, None, ERR),
    ("The answer is (E).", C, ABCD, None, ERR),
    ("E", D, ABCD, None, ERR),
    ("Answer: E\nThe answer is (B).", D, ABCD, None, ERR),  # the stated answer wins, and it is invalid
    ("", D, ABCD, None, ERR),
    ("I cannot determine this from the image.", D, ABCD, None, ERR),
]


@pytest.mark.parametrize(("reply", "mode", "labels", "letter", "status"), LETTER_CASES)
def test_letter_table(reply, mode, labels, letter, status):
    parsed = parse_letter(reply, labels, mode)
    assert (parsed.answer, parsed.status) == (letter, status), parsed.rule


# (reply, mode, expected normalised answer or None, expected status)
FREE_CASES = [
    ("Answer: Paris", D, "paris", OK),
    ("Answer: The Eiffel Tower.", D, "eiffel tower", OK),
    ("It shows two cats. The answer is (2).", C, "2", OK),
    ("The answer is two.", C, "2", OK),
    ("Answer: 2.0", D, "2", OK),
    ("Answer: 1,000", D, "1000", OK),
    ("Answer: twenty-one", D, "21", OK),
    ("The answer is (red apple).", C, "red apple", OK),
    ("Answer: \\boxed{12}", D, "12", OK),
    ("The answer is Paris.", D, "paris", FB),
    ("Paris", D, "paris", FB),
    ("Let me think.\nThe tower is tall and it is in a city\nthat I visited.", D, None, ERR),
    ("Answer:", D, None, ERR),
]


@pytest.mark.parametrize(("reply", "mode", "normalized", "status"), FREE_CASES)
def test_free_table(reply, mode, normalized, status):
    parsed = parse_free(reply, mode)
    assert parsed.status == status, parsed.rule
    assert (normalize_free(parsed.answer) if parsed.ok else None) == normalized


TOOLS = ("get_weather", "get_time", "send_email")

# (reply, mode, expected tool, expected status)
TOOL_CASES = [
    ("Answer: get_weather", D, "get_weather", OK),
    ("Answer: get_weather(city='Paris')", D, "get_weather", OK),
    ("Answer: `send_email`", D, "send_email", OK),
    ("I need the clock. The answer is (get_time).", C, "get_time", OK),
    ("Answer: GET_TIME", D, "get_time", OK),
    ('{"name": "send_email", "arguments": {"to": "a@b.c"}}', D, "send_email", FB),
    ("I will call get_weather(city='Oslo') now.", D, "get_weather", FB),
    ("get_time", D, "get_time", FB),
    ("Answer: get_wether", D, None, ERR),
    ("Answer: get_weather or get_time", D, None, ERR),
    ("get_weather() then get_time()", D, None, ERR),
    ("Answer: delete_files", D, None, ERR),
    ("I would check the weather.", D, None, ERR),
]


@pytest.mark.parametrize(("reply", "mode", "tool", "status"), TOOL_CASES)
def test_tool_table(reply, mode, tool, status):
    parsed = parse_tool(reply, TOOLS, mode)
    assert (parsed.answer, parsed.status) == (tool, status), parsed.rule


@pytest.mark.parametrize(("a", "b"), [
    ("two", "2"), ("2.0", "2"), ("0.50", ".5"), ("The Eiffel Tower", "eiffel tower"), ("  Paris. ", "paris"),
    ("the answer is Paris", "Paris"), ("The final answer is: Paris", "paris"), ("an apple", "apple"), ("twenty one", "21"),
    ("two hundred five", "205"), ("1,000", "1000"), ("New   York", "new york"), ("Ｐａｒｉｓ", "paris"),
])
def test_normalize_free_equates(a, b):
    assert normalize_free(a) == normalize_free(b)


@pytest.mark.parametrize(("a", "b"), [
    ("2", "3"), ("one two", "3"), ("-3", "3"), ("apple", "apples"), ("2nd", "2"),
    ("Vitamin A", "vitamin"), ("U.S.A.", "U S"), ("A", ""), ("Hepatitis B", "Hepatitis"),
])
def test_normalize_free_keeps_apart(a, b):
    assert normalize_free(a) != normalize_free(b)


@pytest.mark.parametrize(("raw", "normalized"), [
    ("Vitamin A", "vitamin a"), ("U.S.A.", "u.s.a"), ("A", "a"), ("The Beatles.", "beatles"),
    ('"Paris."', "paris"), ("the answer is an apple", "apple"), ("a", "a"), ("Paris, France", "paris, france"),
])
def test_normalize_free_strips_only_what_the_reference_strips(raw, normalized):
    """A leading article, edge punctuation, "the answer is": FACET-PROBE v0.0.1's `normalize_text`."""
    assert normalize_free(raw) == normalized


@pytest.mark.parametrize("mode", [D, C])
@pytest.mark.parametrize("fmt", ["B", "Paris", "get_time"])
def test_replies_in_the_instructed_form_parse_ok(mode, fmt):
    """`format_answer` (the facets' own writer of instructed replies) always parses as `ok`."""
    reply = format_answer(mode, fmt, rationale="Short reasoning here.")
    if fmt == "B":
        parsed = parse_letter(reply, ABCD, mode)
    elif fmt == "get_time":
        parsed = parse_tool(reply, TOOLS, mode)
    else:
        parsed = parse_free(reply, mode)
    assert (parsed.answer, parsed.status) == (fmt, OK)


def _prompt(fmt: AnswerFormat, labels=(), mode=D) -> Prompt:
    return Prompt(system="s", messages=(Message("user", (TextPart("q"),)),), mode=mode,
                  answer_format=fmt, labels=labels)


def test_parse_answer_dispatches_on_the_prompt():
    assert parse_answer(_prompt(AnswerFormat.LETTER, ("A", "B")), "Answer: B").answer == "B"
    assert parse_answer(_prompt(AnswerFormat.LETTER, ("A", "B")), "Answer: C").status == ERR
    assert parse_answer(_prompt(AnswerFormat.FREE, mode=C), "The answer is (Oslo).").answer == "Oslo"
    assert parse_answer(_prompt(AnswerFormat.TOOL), "Answer: get_time", TOOLS).answer == "get_time"


def test_bad_labels_and_missing_tools_are_clear_errors():
    with pytest.raises(ValueError, match="single letters"):
        parse_letter("Answer: A", ("A1", "B1"))
    with pytest.raises(ValueError, match="single letters"):
        parse_letter("Answer: A", ())
    with pytest.raises(ValueError, match="offered tool names"):
        parse_tool("Answer: f", ())
