"""The values the HF runner's parts pass around: one encoded prompt, one generated row, and a batch of encoded
prompts laid out in padded rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Encoded:
    """One prompt ready for the model: token ids, [0,1] images (the attack variable), target span."""

    input_ids: torch.Tensor  # (L,) long, image placeholders expanded
    images01: list[torch.Tensor]  # one [0,1] float tensor per image, in display order
    token_fields: dict[str, torch.Tensor] = field(default_factory=dict)  # per-token extras, e.g. mm_token_type_ids
    prompt_len: int = 0  # tokens of the prompt; generation starts here
    target_span: tuple[int, int] | None = None  # [start, end) of target_text's tokens in input_ids
    text: str = ""  # the rendered prompt (chat template applied, placeholders not yet expanded)
    extras: dict[str, Any] = field(default_factory=dict)  # family-specific, e.g. precomputed pixels (Kimi-VL)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def target_ids(self) -> torch.Tensor:
        if self.target_span is None:
            raise ValueError("this prompt was encoded without a target_text")
        return self.input_ids[self.target_span[0]:self.target_span[1]]

    def prompt_only(self) -> Encoded:
        """The same encoding without the target continuation."""
        n = self.prompt_len
        return Encoded(self.input_ids[:n], self.images01, {k: v[:n] for k, v in self.token_fields.items()},
                       n, None, self.text, self.extras)


@dataclass
class Generated:
    """One row of a batched `generate`: its new tokens up to the first EOS, and how it stopped."""

    ids: list[int]  # new token ids, the EOS and anything after it removed
    stopped: bool  # True: an EOS ended it; False: max_new_tokens did
    width: int  # new tokens the batch generated for every row (EOS and padding included)


#: one piece of a padded row: the encoded prompt, where its tokens go in the row, which of its tokens go there
Piece = tuple[Encoded, slice, slice]


def lay_out(rows: Sequence[Sequence[Piece]], width: int, pad_id: int) -> dict[str, torch.Tensor]:
    """Token ids, attention mask and per-token fields of `len(rows)` rows of `width` tokens: each row's pieces
    placed, the rest padding (`pad_id`, masked). Left or right padding, or a prefix and its rest apart, are the
    pieces' places."""
    fields_of = next(e for row in rows for e, _, _ in row).token_fields
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    fields = {k: torch.zeros((len(rows), width), dtype=v.dtype) for k, v in fields_of.items()}
    for i, row in enumerate(rows):
        for e, place, part in row:
            ids[i, place] = e.input_ids[part]
            mask[i, place] = 1
            for k, v in e.token_fields.items():
                fields[k][i, place] = v[part]
    return {"input_ids": ids, "attention_mask": mask, **fields}
