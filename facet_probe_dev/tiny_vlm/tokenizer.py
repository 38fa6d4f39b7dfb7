"""The tiny VLM's tokenizer: a byte-level BPE trained offline on the rendered synthetic corpus.

Byte-level, so every string round-trips (an unseen word is spelled in bytes, never `<unk>`); trained
on the synthetic prompts and answers, so every word of the closed synthetic vocabulary and every fixed
string of the prompts (`facets/prompts.py`) is one or a few tokens and prompts stay short.

The chat template is the model's own (saved with the tokenizer and the processor, applied by the
LLaVA runner like any hub model's)::

    <s><|system|>
    {system}
    <|user|>
    {user text, "<image>" at each image slot}
    <|assistant|>
    {reply}</s>
    ...
    <|assistant|>            <- add_generation_prompt

Content may be a string or a list of parts (``{"type": "text", "text": ...}``, ``{"type": "image"}``;
any other key of an image part is ignored), so the template accepts both the runner's messages and
plain strings. The `LlavaProcessor` expands each ``<image>`` to one token per vision patch.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from facet_probe.facets import prompts as P

BOS, EOS, PAD, UNK = "<s>", "</s>", "<pad>", "<unk>"
IMAGE_TOKEN = "<image>"
SYSTEM_TAG, USER_TAG, ASSISTANT_TAG = "<|system|>", "<|user|>", "<|assistant|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, IMAGE_TOKEN, SYSTEM_TAG, USER_TAG, ASSISTANT_TAG]

#: GPT-2's pre-tokenizer split, except that a run of newlines is one piece ("\n\n" between blocks is
#: one token, not two).
SPLIT_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\n+|\s+(?!\S)|\s+"

#: What add_generation_prompt appends: the model's reply starts right after it.
GENERATION_PROMPT = ASSISTANT_TAG + "\n"

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}" + SYSTEM_TAG + "{{ '\\n' }}"
    "{% elif message['role'] == 'user' %}" + USER_TAG + "{{ '\\n' }}"
    "{% else %}" + ASSISTANT_TAG + "{{ '\\n' }}{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}" + IMAGE_TOKEN + ""
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}" + ASSISTANT_TAG + "{{ '\\n' }}{% endif %}"
)


def prompt_phrases() -> list[str]:
    """The fixed sentences every prompt repeats (system texts, answer instructions, headers), from the
    prompt contract `facets/prompts.py`. Each becomes one (non-special) token, which shortens every
    prompt by ~40 tokens; a text that merely contains one still round-trips exactly."""
    phrases = [P.SYSTEM_PROMPT, *P.SYSTEM_PROMPTS.values(), *P.DIRECT_INSTRUCTIONS.values(),
               *P.COT_INSTRUCTIONS.values(), P.DOCUMENTS_HEADER, P.TOOLS_HEADER]
    return list(dict.fromkeys(phrases))


def option_markers(n: int = 8) -> list[str]:
    """The start of each option line ("\\nA." ... for the first `n` letters), one token each, so that
    an option's content token sits right after its letter's token (a one-step lookback, the pattern
    previous-token heads learn first, instead of two)."""
    return ["\n" + P.OPTION_TEMPLATE.format(letter=letter, text="").rstrip() for letter in P.OPTION_LETTERS[:n]]


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 1024,
                    phrases: Iterable[str] = ()) -> PreTrainedTokenizerFast:
    """Train the byte-level BPE on `corpus` (deterministic for a given corpus order); each of `phrases`
    is added as one whole token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken(p, single_word=False, normalized=False, special=False) for p in phrases])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, extra_special_tokens={"image_token": IMAGE_TOKEN},
                                   padding_side="left", model_max_length=2048)
    fast.chat_template = CHAT_TEMPLATE
    return fast


__all__ = ["CHAT_TEMPLATE", "GENERATION_PROMPT", "IMAGE_TOKEN", "SPECIAL_TOKENS", "option_markers", "prompt_phrases",
           "train_tokenizer"]
