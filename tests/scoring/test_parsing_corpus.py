"""A corpus of real-looking multiple-choice replies (direct and CoT, in each provider's habits) with the
reading a careful human would give: the letter, and whether the reply used the instructed form (ok), a
documented fallback rung (fallback), or gave no readable answer (parse_error). Never a word as a letter."""

from __future__ import annotations

import pytest

from facet_probe.core.prompts import PromptMode
from facet_probe.scoring.parsing import ParseStatus, parse_letter

D, C = PromptMode.DIRECT, PromptMode.COT
OK, FB, ERR = ParseStatus.OK, ParseStatus.FALLBACK, ParseStatus.PARSE_ERROR
ABCD = ("A", "B", "C", "D")

# (habit, reply, mode, letter, status)
CORPUS = [
    # --- the instructed forms, as models actually write them
    ("plain", "Answer: B", D, "B", OK),
    ("bold label", "**Answer:** C", D, "C", OK),
    ("bold label, parenthesised", "**Answer:** (C)", D, "C", OK),
    ("bold letter", "Answer: **D**", D, "D", OK),
    ("trailing explanation", "Answer: A\n\nExplanation: the figure shows a triangle, so A.", D, "A", OK),
    ("letter and option text", "Answer: B. Mitochondria", D, "B", OK),
    ("letter, paren and text", "Answer: C) 42 km", D, "C", OK),
    ("heading", "### Answer: D", D, "D", OK),
    ("quote", "> Answer: A", D, "A", OK),
    ("lower case", "answer: c", D, "C", OK),
    ("next line", "Answer:\nB", D, "B", OK),
    ("reasoning first (direct)", "The chart peaks in March, which is option C.\nAnswer: C", D, "C", OK),
    ("revised", "Answer: A\nOn reflection the units differ.\nAnswer: B", D, "B", OK),
    ("fullwidth", "Answer: Ｂ", D, "B", OK),
    ("cot", "Step 1: read the table. Step 2: compare. The answer is (D).", C, "D", OK),
    ("cot, no parentheses", "Comparing both, the answer is B.", C, "B", OK),
    ("cot, bold", "Therefore, **the answer is (A).**", C, "A", OK),
    ("cot, final", "So the final answer is (C).", C, "C", OK),
    ("cot, colon", "The answer is: (B)", C, "B", OK),
    ("cot, bracketed", "The answer is [D].", C, "D", OK),
    ("cot, multi-paragraph", "First, ...\n\nSecond, ...\n\nThe answer is (C).\n", C, "C", OK),
    ("cot, restated", "The answer is (A)... wait, no: the answer is (B).", C, "B", OK),
    # --- the other mode's form: a fallback
    ("cot form under a direct prompt", "The answer is (B).", D, "B", FB),
    ("direct form under a CoT prompt", "Reasoning: the leaf is green.\nAnswer: A", C, "A", FB),
    ("final answer", "Final answer: D", D, "D", FB),
    ("final answer, bold", "**Final Answer:** C", D, "C", FB),
    # --- variants of the instructed form: fallback rungs
    ("option word", "Answer: Option B", D, "B", FB),
    ("choice word", "Answer: choice (C)", D, "C", FB),
    ("nested form", "Answer: The answer is B", D, "B", FB),
    ("nested form, parenthesised", "Answer: the answer is (D).", D, "D", FB),
    ("dash", "Answer - B", D, "B", FB),
    ("em dash", "Answer \u2014 C", D, "C", FB),
    ("boxed", "The area is 12, which matches \\boxed{C}", D, "C", FB),
    ("boxed text", "$\\boxed{\\text{A}}$", D, "A", FB),
    ("correct answer is", "The correct answer is B.", D, "B", FB),
    ("best option is", "Having compared them, the best option is (D).", D, "D", FB),
    ("label and text", "B) Paris", D, "B", FB),
    ("label and text, parenthesised", "(C) The second image", D, "C", FB),
    ("lone letter", "C", D, "C", FB),
    ("lone letter, bold", "**A**", D, "A", FB),
    ("lone letter, parenthesised, last line", "Looking at the options again:\n(B)", D, "B", FB),
    ("one parenthesised label", "Only (D) is consistent with both charts.", D, "D", FB),
    ("option mention", "I'd go with option A here.", D, "A", FB),
    ("choice mention", "Choice C fits best.", D, "C", FB),
    # --- what is never read
    ("a word, not a letter", "Answer: Carbon dioxide", D, None, ERR),
    ("an article, not a letter", "Answer: A bird", D, None, ERR),
    ("an article in cot", "The answer is a red square.", C, None, ERR),
    ("pronoun I", "I think it depends on the lighting.", D, None, ERR),
    ("sentence-initial A", "A close look shows a shadow.", D, None, ERR),
    ("two labels", "(A) is wrong and (B) is right.", D, None, ERR),
    ("two options", "Either option A or option C could work.", D, None, ERR),
    ("hedged", "Answer: A or B", D, None, ERR),
    ("out of range", "Answer: E", D, None, ERR),
    ("out of range in cot", "The answer is (F).", C, None, ERR),
    ("stated answer wins, and is invalid", "Answer: E\nThe answer is (B).", D, None, ERR),
    ("listing the options", "A) red\nB) blue\nC) green\nD) yellow", D, None, ERR),
    ("empty", "", D, None, ERR),
    ("whitespace", "   \n  ", D, None, ERR),
    # --- refusals and non-answers
    ("refusal (OpenAI)", "I'm sorry, but I can't help with that.", D, None, ERR),
    ("refusal (Anthropic)", "I don't feel comfortable answering this question.", D, None, ERR),
    ("refusal (Gemini)", "I cannot determine the answer from the image provided.", D, None, ERR),
    ("cut off", "Let me think about each option. First, option", D, None, ERR),
    ("asks back", "Could you share a clearer image?", D, None, ERR),
    ("cot without a verdict", "The first image shows a dog and the second a cat, so it depends.", C, None, ERR),
]


@pytest.mark.parametrize(("habit", "reply", "mode", "letter", "status"), CORPUS, ids=[c[0] for c in CORPUS])
def test_reply_corpus(habit, reply, mode, letter, status):
    parsed = parse_letter(reply, ABCD, mode)
    assert (parsed.answer, parsed.status) == (letter, status), f"{habit}: {parsed.rule}"


def test_the_corpus_is_large_and_covers_each_mode_and_outcome():
    assert len(CORPUS) >= 60
    assert {(m, s) for _, _, m, _, s in CORPUS} >= {(D, OK), (C, OK), (D, FB), (C, FB), (D, ERR), (C, ERR)}
