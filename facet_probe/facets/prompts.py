"""Every fixed string of a rendered prompt, in one place.

These strings are a contract: the answer parser, the reference policies, the tiny VLM's training
data and the attack templates import them, so a model is trained, attacked and scored on exactly the
wording the facets render. Change them only together with those users (and note it in the changelog),
because every prompt hash changes with them.

Answer forms (X is a displayed option letter, a short free-form answer, or a function name):

- direct mode (`PromptMode.DIRECT`): the reply is one final line ``Answer: X``
  (`DIRECT_ANSWER_TEMPLATE`);
- chain-of-thought mode (`PromptMode.COT`): a one- or two-sentence rationale, then
  ``The answer is (X).`` (`COT_ANSWER_TEMPLATE`).

`answer_instruction(mode, answer_format)` gives the instruction that closes the user's message;
`format_answer(mode, answer, rationale)` writes a reply in the instructed form (policies, training
data). The layout strings (`QUESTION_TEMPLATE`, the `*_LABEL`s, headers) are described with each
facet in docs/facets.md.
"""

from __future__ import annotations

from facet_probe.core.prompts import AnswerFormat, PromptMode

# --- answers -------------------------------------------------------------------------------------

#: The prefix of the direct-mode answer line.
DIRECT_ANSWER_PREFIX = "Answer:"
#: The direct-mode answer line; the reply's last line.
DIRECT_ANSWER_TEMPLATE = "Answer: {answer}"
#: The prefix of the chain-of-thought closing sentence.
COT_ANSWER_PREFIX = "The answer is"
#: The chain-of-thought closing sentence, after the rationale.
COT_ANSWER_TEMPLATE = "The answer is ({answer})."

#: What X stands for in the instruction, per answer format.
ANSWER_TARGETS: dict[AnswerFormat, str] = {
    AnswerFormat.LETTER: "the letter of the correct option",
    AnswerFormat.FREE: "a short answer (a word or a short phrase)",
    AnswerFormat.TOOL: "the name of the function to call",
}

DIRECT_INSTRUCTION_TEMPLATE = 'Reply with one line of the form "Answer: X", where X is {target}.'
COT_INSTRUCTION_TEMPLATE = (
    "Give your reasoning in one or two sentences, then end with "
    '"The answer is (X).", where X is {target}.')

#: The full direct-mode instruction per answer format.
DIRECT_INSTRUCTIONS: dict[AnswerFormat, str] = {
    f: DIRECT_INSTRUCTION_TEMPLATE.format(target=t) for f, t in ANSWER_TARGETS.items()}
#: The full chain-of-thought instruction per answer format.
COT_INSTRUCTIONS: dict[AnswerFormat, str] = {
    f: COT_INSTRUCTION_TEMPLATE.format(target=t) for f, t in ANSWER_TARGETS.items()}


def answer_instruction(mode: PromptMode | str, answer_format: AnswerFormat | str) -> str:
    """The instruction closing the user's message for this mode and answer format."""
    table = DIRECT_INSTRUCTIONS if PromptMode(mode) == PromptMode.DIRECT else COT_INSTRUCTIONS
    return table[AnswerFormat(answer_format)]


def format_answer(mode: PromptMode | str, answer: str, rationale: str = "") -> str:
    """A reply in the instructed form: ``Answer: X`` (direct) or ``<rationale> The answer is (X).``
    (CoT; the rationale is optional here, but the instruction asks for one)."""
    if PromptMode(mode) == PromptMode.DIRECT:
        return DIRECT_ANSWER_TEMPLATE.format(answer=answer)
    closing = COT_ANSWER_TEMPLATE.format(answer=answer)
    return f"{rationale.strip()} {closing}" if rationale.strip() else closing


# --- system text ---------------------------------------------------------------------------------

#: The system text of every built-in facet but the dialog one (a facet's `system` attribute says which it uses).
SYSTEM_PROMPT = "You are a careful assistant. Read the user's message and answer the question in it."
#: The dialog facet's system text (the question follows a conversation).
DIALOG_SYSTEM_PROMPT = "You are a careful assistant. Read the conversation and answer the final question."
#: The built-in system texts besides `SYSTEM_PROMPT`, by the form of the user's turn they introduce (the tiny
#: VLM's tokenizer learns each as one phrase).
SYSTEM_PROMPTS: dict[str, str] = {"conversation": DIALOG_SYSTEM_PROMPT}


# --- layout --------------------------------------------------------------------------------------

#: The question line; it always follows the components and precedes the options.
QUESTION_TEMPLATE = "Question: {question}"
#: One option line (options follow the question, one per line).
OPTION_TEMPLATE = "{letter}. {text}"
#: Option letters in display order (A = first displayed option).
OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: Labels of components, numbered by display slot among components of the same kind (1-based).
CHUNK_LABEL = "Chunk {n}"
DOCUMENT_LABEL = "Document {n}"
IMAGE_LABEL = "Image {n}"
EXAMPLE_LABEL = "Example {n}"
TOOL_LABEL = "Tool {n}"
#: A fixed (never permuted) image: "Figure", or "Figure {n}" when the item has several.
FIGURE_LABEL = "Figure"
FIGURE_LABEL_NUMBERED = "Figure {n}"
#: A dialog turn shown as text (only outside dialog_turn_order, which renders real chat turns).
TURN_TEMPLATE = "{role}: {text}"
#: A few-shot demonstration's body under its label.
EXAMPLE_BODY_TEMPLATE = "Question: {question}\nAnswer: {answer}"

#: Header before the ranked documents of document_rank_order (Document 1 = top rank).
DOCUMENTS_HEADER = "Retrieved documents, most relevant first:"
#: Header before the tools of tool_description_order.
TOOLS_HEADER = "Available tools:"
#: The user's opening message of dialog_turn_order when the first displayed turn is the
#: assistant's (chat templates and providers want a conversation to start with the user).
DIALOG_OPENING = "Hello."
