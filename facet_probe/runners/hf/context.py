"""Does a prompt fit the model's context? Counted before the call, so an overflow is a label, not a silent run.

`generate` would run a 9,042-token prompt on a 1,024-position model without a word (positions past the
trained range give garbage). The HF runner counts every encoded prompt (text and image tokens) plus the
`max_new_tokens` budget against the text model's `max_position_embeddings`: a trial that cannot fit is
returned as an error of kind `context_overflow`, and a cell where most of a sample of its prompts cannot fit
stops the run before any call, naming what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ContextCheck(StrEnum):
    """`label` (default): count and label before the call; `off`: generate whatever the length, as FACET-PROBE
    v0.0.1 did (docs/compatibility.md)."""

    LABEL = "label"
    OFF = "off"


class HFFailureKind(StrEnum):
    """Why an HF trial has no answer; the error text starts with `<kind>:` as the API runners' do."""

    CONTEXT_OVERFLOW = "context_overflow"  # prompt + max_new_tokens > the model's positions: not attempted
    ENCODE = "encode"  # the prompt could not be encoded (template, images)
    OUT_OF_MEMORY = "out_of_memory"  # even at batch size 1
    GENERATION = "generation"  # generate raised


@dataclass(frozen=True)
class Fit:
    """One prompt's token count against the model's limit."""

    prompt_tokens: int
    image_tokens: int
    max_new_tokens: int
    limit: int | None  # the model's positions; None when the config does not say

    @property
    def needed(self) -> int:
        return self.prompt_tokens + self.max_new_tokens

    @property
    def fits(self) -> bool:
        return self.limit is None or self.needed <= self.limit

    def reason(self) -> str:
        return (f"{HFFailureKind.CONTEXT_OVERFLOW}: the prompt is {self.prompt_tokens} tokens ({self.image_tokens} "
                f"image tokens) + max_new_tokens {self.max_new_tokens} = {self.needed} > the model's {self.limit} "
                "positions; not attempted")


def context_limit(config) -> int | None:
    """The text model's positions (`max_position_embeddings` of the text config), None when absent."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text, "max_position_embeddings", None) or getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def most_do_not_fit(fits: list[Fit]) -> bool:
    """More than half of a cell's sampled prompts cannot fit: running it would be mostly errors."""
    return bool(fits) and sum(not f.fits for f in fits) * 2 > len(fits)


def cell_overflow_message(model: str, cell: str, fits: list[Fit], hints: list[str]) -> str:
    """The early stop for a cell whose prompts mostly cannot fit: how far over, and what to change."""
    over = [f for f in fits if not f.fits]
    worst = max(over, key=lambda f: f.needed)
    change = "; ".join([*hints, f"model.generation.max_new_tokens (now {worst.max_new_tokens})",
                        "or a model with a longer context"])
    return (f"{model}: {len(over)} of {len(fits)} sampled prompts of cell {cell} cannot fit the model's "
            f"{worst.limit} positions (up to {worst.prompt_tokens} prompt tokens, {worst.image_tokens} of them "
            f"image tokens, + {worst.max_new_tokens} new). Nothing was called for this cell. Change: {change}.")
