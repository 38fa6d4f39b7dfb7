"""Provider-neutral rendered prompts: what every runner receives.

A `Prompt` is a system text plus chat messages whose content is an ordered list of text and image
parts, in display order. Runners translate it to their own wire or chat format and must keep the
parts in order (images interleaved at their slots, never dropped). The prompt hash covers the exact
text and the image digests, so it identifies what the model saw.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal

from facet_probe.core.errors import parse_enum
from facet_probe.core.items import ImageRef


class PromptMode(StrEnum):
    DIRECT = "direct"  # "Answer: X"
    COT = "cot"  # a short rationale, then "The answer is (X)."

    @classmethod
    def of(cls, cot: bool | str) -> PromptMode:
        """The mode a `prompt.cot` switch sets (on: chain of thought, off: direct); a mode or its name is itself,
        any other text one ConfigError naming the modes."""
        if isinstance(cot, str):  # a PromptMode is a str too
            return parse_enum(cls, cot, "a prompt mode")
        return cls.COT if cot else cls.DIRECT


class AnswerFormat(StrEnum):
    LETTER = "letter"  # one of the displayed option letters
    FREE = "free"  # a short free-form answer
    TOOL = "tool"  # a function name


@dataclass(frozen=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ImagePart:
    image: ImageRef
    type: Literal["image"] = "image"


Part = TextPart | ImagePart


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]

    def text(self) -> str:
        """The message's text parts joined (images left out)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True)
class Prompt:
    """What a model is asked: system text, ordered messages, and how the answer must look.

    `labels` are the option letters as displayed (empty for free-form answers); the last message is
    always the user's turn that carries the question and the answer instruction.
    """

    system: str
    messages: tuple[Message, ...]
    mode: PromptMode = PromptMode.DIRECT
    answer_format: AnswerFormat = AnswerFormat.LETTER
    labels: tuple[str, ...] = ()
    hash: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.messages or self.messages[-1].role != "user":
            raise ValueError("a prompt must end with a user message")
        if not self.hash:
            object.__setattr__(self, "hash", prompt_hash(self))

    def images(self) -> list[ImageRef]:
        """Images in display order across all messages."""
        return [p.image for m in self.messages for p in m.parts if isinstance(p, ImagePart)]

    def to_json(self) -> dict:
        """A canonical, JSON-safe description (images by digest) used for hashing and records."""
        return {
            "system": self.system,
            "messages": [
                {"role": m.role, "parts": [
                    {"type": "text", "text": p.text} if isinstance(p, TextPart)
                    else {"type": "image", "sha256": p.image.sha256} for p in m.parts]}
                for m in self.messages],
            "mode": str(self.mode),
            "answer_format": str(self.answer_format),
            "labels": list(self.labels),
        }


def with_instruction(prompt: Prompt, instruction: str | None) -> Prompt:
    """`prompt` with `instruction` (a prompt mitigation's, `facet_probe.audit.mitigation`) appended to its system
    text after a blank line, hash recomputed; the same prompt when there is none."""
    if not isinstance(instruction, str) or not instruction:  # None, '' or a missing value read from a table
        return prompt
    return replace(prompt, system=f"{prompt.system}\n\n{instruction}" if prompt.system else instruction, hash="")


def prompt_hash(prompt: Prompt) -> str:
    """SHA-256 over the canonical JSON of the prompt (exact text + image digests), 16 hex chars."""
    canon = json.dumps(prompt.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]
