"""What the model saw, recovered exactly: each stored trial's prompt rendered again from its item and
permutation, kept only when its hash equals the stored `prompt_hash`; images collected once by digest."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hydra.utils import instantiate

from facet_probe.config.loading import available, load_option
from facet_probe.core.items import ImageRef, Item
from facet_probe.core.prompts import ImagePart, Prompt, PromptMode, with_instruction
from facet_probe.facets.base import Facet

#: How a prompt could be recovered: exactly (hash equal), differently (rendered, hash differs), or not at all.
EXACT, DIFFERS, UNAVAILABLE = "exact", "differs", "unavailable"
_MIME = ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif"), (b"RIFF", "image/webp"))


@cache
def facet_named(name: str) -> Facet | None:
    """The facet config of that name, or None when none has it (trials from elsewhere)."""
    return instantiate(load_option("facet", name)) if name in available("facet") else None


def mime_of(data: bytes) -> str:
    return next((m for magic, m in _MIME if data.startswith(magic)), "application/octet-stream")


@dataclass
class Seen:
    """Rendered prompts by stored hash, the system texts they share, and every image once by digest."""

    page_dir: Path
    prompts: dict[str, dict] = field(default_factory=dict)  # stored prompt_hash -> page form + recovery
    systems: list[str] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)  # sha256 -> data URI or path relative to the page
    _system_ids: dict[str, int] = field(default_factory=dict)
    _items: dict[tuple[str, str], Item | None] = field(default_factory=dict)

    def item(self, dataset: str, item_id: str, records: dict[tuple[str, str], dict]) -> Item | None:
        key = (str(dataset), str(item_id))
        if key not in self._items:
            rec = records.get(key)
            try:
                self._items[key] = Item.model_validate(rec) if rec is not None else None
            except ValueError:  # an image path that moved since the run: nothing to show it from
                self._items[key] = None
        return self._items[key]

    def add(self, stored_hash: str, facet: str, item: Item | None, permutation: Iterable[int], mode: str | None,
            instruction: str | None = None) -> str:
        """Recover one trial's prompt (once per stored hash; `instruction`: the trial's prompt mitigation text);
        returns how: EXACT, DIFFERS or UNAVAILABLE (no item, no facet, or no mode: FACET-PROBE v0.0.1 trials)."""
        if stored_hash in self.prompts:
            return self.prompts[stored_hash]["recovered"]
        prompt = None
        f = facet_named(facet)
        if item is not None and f is not None and mode:
            try:
                prompt = with_instruction(f.render(item, tuple(int(p) for p in permutation), PromptMode(mode)),
                                          instruction)
            except ValueError:  # the stored ordering no longer fits the item
                prompt = None
        if prompt is None:
            self.prompts[stored_hash] = {"recovered": UNAVAILABLE}
            return UNAVAILABLE
        how = EXACT if prompt.hash == stored_hash else DIFFERS
        self.prompts[stored_hash] = {"recovered": how, "rendered_hash": prompt.hash, **self.page_form(prompt)}
        return how

    def page_form(self, prompt: Prompt) -> dict:
        """The prompt as the page shows it: system (by index), messages of text / image-digest parts, labels."""
        if prompt.system not in self._system_ids:
            self._system_ids[prompt.system] = len(self.systems)
            self.systems.append(prompt.system)
        messages = []
        for m in prompt.messages:
            parts: list[dict[str, str] | str] = []
            for p in m.parts:
                if isinstance(p, ImagePart):
                    self.add_image(p.image)
                    parts.append({"img": p.image.sha256})
                else:
                    parts.append(p.text)
            messages.append([m.role, parts])
        return {"s": self._system_ids[prompt.system], "m": messages, "labels": list(prompt.labels),
                "format": str(prompt.answer_format)}

    def add_image(self, ref: ImageRef) -> None:
        """An image once: a file by its path relative to the page, bytes as one data URI."""
        if ref.sha256 in self.images:
            return
        if ref.path is not None:
            self.images[ref.sha256] = Path(os.path.relpath(Path(ref.path).resolve(), self.page_dir.resolve())).as_posix()
            return
        data = ref.read_bytes()
        self.images[ref.sha256] = f"data:{mime_of(data)};base64,{base64.b64encode(data).decode()}"
