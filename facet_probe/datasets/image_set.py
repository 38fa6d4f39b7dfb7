"""What the image-set loaders share (Mantis-Eval, MedFrameQA): a row's images as orderable components, the
reference runner's view of an image-set row, and a loader whose items pass the position-reference screen.

Each loader keeps only what differs: its columns, its filter and the metadata it records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from facet_probe.core.items import Component, ComponentKind, Item
from facet_probe.datasets.hub import Candidate, UpstreamLoader, hf_image
from facet_probe.datasets.screen import ScreenRules, ScreenSettings

_REFERENCE_PREFIX = re.compile(r"^\(?([A-Z])\)?[\.\):\s]\s*(.+)$")
REFERENCE_MAX_IMAGES = 6  #: the reference shows the first 6 decodable images of a row


def image_components(values: Sequence[Any], item_id: str, what: str = "image") -> tuple[Component, ...]:
    """The images of a row as components `img0`, `img1`, ... (an error names `what` and its 1-based number)."""
    return tuple(Component(id=f"img{i}", kind=ComponentKind.IMAGE, image=hf_image(v, item_id, f"{what} {i + 1}"))
                 for i, v in enumerate(values))


# --------------------------------------------------------------------------- as the reference (`sampling: reference`)
def reference_choices(options: Sequence[Any]) -> list[str]:
    """The reference's `_strip_choice_prefixes`: "(A) x", "A. x", "A) x", "(A)x" and also "A x" lose the label."""
    return [m.group(2).strip() if (m := _REFERENCE_PREFIX.match(str(o).strip())) else str(o).strip() for o in options]


def reference_letter(answer: Any) -> str | None:
    """The reference's `_letter_from_text`: the first letter of the answer ("(b)", "C: a dog"), in range or not."""
    m = re.match(r"^\(?([A-Z])", str(answer or "").strip().upper())
    return m.group(1) if m else None


def decodable(image: Any) -> bool:
    """An image struct the reference can decode: bytes, or a path that is a file (else it drops the image)."""
    if isinstance(image, dict):
        return bool(image.get("bytes")) or bool(image.get("path") and Path(image["path"]).is_file())
    return bool(image)


def reference_fields(images: Sequence[Any], options: Sequence[Any], answer: Any) -> dict[str, Any] | None:
    """What the reference shows of an image-set row (decodable images, cut to 6; stripped choices; the gold
    letter), or None when it drops the row (fewer than 3 images or 2 choices, no letter)."""
    shown = [v for v in images if decodable(v)][:REFERENCE_MAX_IMAGES]
    choices, letter = reference_choices(options), reference_letter(answer)
    if len(shown) < 3 or len(choices) < 2 or letter is None:
        return None
    return {"ref_images": shown, "ref_choices": choices, "ref_gold": ord(letter) - 65}


def reference_unusable(question: str, fields: dict[str, Any]) -> str | None:
    """Why a row the reference keeps cannot be an item (skipped and counted), or None."""
    if not question.strip():
        return "the question is empty"
    if fields["ref_gold"] >= len(fields["ref_choices"]):
        return "the answer letter is not among the options"
    return None


class ImageSetLoader(UpstreamLoader):
    """A loader of image-set MCQ rows (`min_images`-`max_images` images), screened for position references."""

    facets: ClassVar[tuple[str, ...]] = ("image_set_order",)

    def __init__(self, name: str, min_images: int, max_images: int,
                 screen_rules: ScreenRules | str = ScreenRules.REFERENCE, screen_csv: str | None = None,
                 **rest) -> None:
        super().__init__(name, **rest)
        self.screen = ScreenSettings.of(name, screen_rules, screen_csv)
        self.min_images, self.max_images = min_images, max_images

    def reference_candidate(self, item_id: str, row: dict[str, Any], images: Sequence[Any],
                            options: Sequence[Any], answer: Any, question: str) -> Candidate | None:
        """The row as the reference keeps it (`reference_fields` added), or None when it drops the row or no item
        can hold it (skipped and counted)."""
        fields = reference_fields(images, options, answer)
        if fields is None or self.skip(reference_unusable(question, fields)):
            return None
        return Candidate(item_id, {**row, **fields})

    def load(self, limit: int | None = None) -> list[Item]:
        return self.screen.apply(super().load(limit))

    def build(self, candidate: Candidate) -> Item:
        return self.build_many([candidate])[0]
