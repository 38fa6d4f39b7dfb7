"""The shared layout of the facets' prompts (one user message, or chat turns for dialogs).

Every facet renders through `LayoutFacet.render`:

1. the item's fixed context (never permuted, source order): fixed images as "Figure" (numbered when
   there are several), fixed texts as plain paragraphs (with their title as a heading);
2. the item's other components that this facet does not order (source order), labelled like
   ordered ones (choice components are never rendered here: options come from `item.choices`);
3. the facet's optional header (documents, tools), then the ordered components in display order
   (slot j shows source component ``permutation[j]``), each labelled by its display slot among
   components of its kind ("Chunk 1" is whatever is displayed first, never the source position);
4. ``Question: ...``, then the options (``A. ...``, one per line) for multiple-choice items;
5. the answer instruction of the prompt mode (`facets.prompts.answer_instruction`).

Text blocks are separated by a blank line; an image follows its label, and the text after an image
starts on the next line when it belongs to the image's component (a caption), after a blank
line otherwise. Adjacent text is merged into one `TextPart`, so parts alternate text and
images. Images are never dropped: every component's image appears as an `ImagePart` at its slot.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from typing import ClassVar, Literal

from facet_probe.core.items import QUESTION_AS_WRITTEN, AnswerType, Component, ComponentKind, ImageRef, Item
from facet_probe.core.prompts import AnswerFormat, ImagePart, Message, Part, Prompt, PromptMode, TextPart
from facet_probe.facets import prompts as P
from facet_probe.facets.base import Facet, UnsupportedItem

#: The label of each component kind (numbered by display slot within the kind).
KIND_LABELS: dict[str, str] = {
    ComponentKind.TEXT_CHUNK: P.CHUNK_LABEL,
    ComponentKind.DOCUMENT: P.DOCUMENT_LABEL,
    ComponentKind.IMAGE: P.IMAGE_LABEL,
    ComponentKind.FEW_SHOT: P.EXAMPLE_LABEL,
    ComponentKind.TOOL: P.TOOL_LABEL,
}

ANSWER_FORMATS: dict[AnswerType, AnswerFormat] = {
    AnswerType.MCQ: AnswerFormat.LETTER,
    AnswerType.FREE: AnswerFormat.FREE,
    AnswerType.TOOL: AnswerFormat.TOOL,
}


class MessageBuilder:
    """Accumulates one message's parts: text blocks (blank line between) and images."""

    def __init__(self, role: Literal["user", "assistant"]) -> None:
        self.role = role
        self.parts: list[Part] = []

    def block(self, text: str, *, caption: bool = False) -> None:
        """Append a text block after a blank line; a `caption` (the text of the component whose image
        was just added) starts on the line after the image instead."""
        if not self.parts:
            self.parts.append(TextPart(text))
        elif isinstance(self.parts[-1], ImagePart):
            self.parts.append(TextPart(("\n" if caption else "\n\n") + text))
        else:
            self.parts[-1] = TextPart(self.parts[-1].text + "\n\n" + text)

    def image(self, image: ImageRef) -> None:
        self.parts.append(ImagePart(image))

    def message(self) -> Message:
        return Message(role=self.role, parts=tuple(self.parts))


def body_without_title(text: str, title: str | None) -> str:
    """The body with a first line that only repeats the title removed (the title is the heading)."""
    if not title:
        return text.strip()
    lines = text.strip().split("\n")
    if lines and lines[0].strip().rstrip(":").strip() == title.strip():
        lines = lines[1:]
    return "\n".join(lines).strip()


def add_component(b: MessageBuilder, comp: Component, label: str) -> None:
    """Render one component under its label: heading, then its image (if any), then its text."""
    if comp.kind == ComponentKind.DIALOG_TURN:  # a transcript line outside dialog_turn_order
        if comp.image is not None:
            b.block(f"{(comp.role or '').capitalize()}:")
            b.image(comp.image)
            if comp.text.strip():
                b.block(comp.text.strip(), caption=True)
        else:
            b.block(P.TURN_TEMPLATE.format(role=(comp.role or "").capitalize(), text=comp.text.strip()))
        return
    if comp.kind == ComponentKind.FEW_SHOT:
        body = P.EXAMPLE_BODY_TEMPLATE.format(question=comp.text.strip(), answer=(comp.answer or "").strip())
    else:
        body = body_without_title(comp.text, comp.title)
    head = f"{label}: {comp.title.strip()}" if comp.title and comp.title.strip() else f"{label}:"
    if comp.image is not None:
        b.block(head)
        b.image(comp.image)
        if body:
            b.block(body, caption=True)
    elif comp.kind == ComponentKind.FEW_SHOT or (comp.title and comp.title.strip()):
        b.block(f"{head}\n{body}" if body else head)
    else:
        b.block(f"{label}: {body}")


def add_fixed(b: MessageBuilder, item: Item) -> None:
    """The item's fixed context, in source order."""
    n_images = sum(c.image is not None for c in item.fixed)
    seen = 0
    for comp in item.fixed:
        title = comp.title.strip() if comp.title and comp.title.strip() else None
        body = body_without_title(comp.text, title)
        if comp.image is not None:
            seen += 1
            label = P.FIGURE_LABEL if n_images == 1 else P.FIGURE_LABEL_NUMBERED.format(n=seen)
            b.block(f"{label}: {title}" if title else f"{label}:")
            b.image(comp.image)
            if body:
                b.block(body, caption=True)
        elif title:
            b.block(f"{title}\n{body}" if body else title)
        else:
            b.block(body)


def add_labelled(b: MessageBuilder, comps: Sequence[Component], labels: Mapping[str, str] = KIND_LABELS) -> None:
    """Components in the given order, each numbered by its rank among the shown ones of its kind (labels:
    kind -> label template)."""
    counters: dict[str, int] = {}
    for comp in comps:
        counters[comp.kind] = counters.get(comp.kind, 0) + 1
        label = labels.get(comp.kind, "{n}").format(n=counters[comp.kind])
        add_component(b, comp, label)


def add_question(b: MessageBuilder, item: Item, choice_order: Sequence[int],
                 mode: PromptMode) -> tuple[str, ...]:
    """Question, options (display order) and instruction; returns the displayed letters."""
    question = item.question.strip()
    as_written = item.metadata.get(QUESTION_AS_WRITTEN) is True  # a prompt another harness wrote (lm-eval's)
    lines = [question if as_written else P.QUESTION_TEMPLATE.format(question=question)]
    labels: tuple[str, ...] = ()
    if item.answer_type == AnswerType.MCQ:
        if reason := unletterable_reason(item):
            raise ValueError(reason)
        labels = tuple(P.OPTION_LETTERS[: len(choice_order)])
        lines += [P.OPTION_TEMPLATE.format(letter=letter, text=item.choices[src].strip())
                  for letter, src in zip(labels, choice_order, strict=True)]
    b.block("\n".join(lines))
    b.block(P.answer_instruction(mode, ANSWER_FORMATS[item.answer_type]))
    return labels


def unletterable_reason(item: Item) -> str | None:
    """Why an MCQ item's options cannot all be shown with a letter (more than `OPTION_LETTERS`), or None."""
    if item.answer_type != AnswerType.MCQ or len(item.choices) <= len(P.OPTION_LETTERS):
        return None
    return (f"item {item.item_id} offers {len(item.choices)} options, and a question shows at most "
            f"{len(P.OPTION_LETTERS)} (lettered A-Z): split its options over several items or drop the item")


def check_permutation(facet: str, item: Item, permutation: Sequence[int], n: int) -> tuple[int, ...]:
    perm = tuple(int(i) for i in permutation)
    if sorted(perm) != list(range(n)):
        raise ValueError(f"{facet}: {list(perm)} is not a permutation of the {n} orderable "
                         f"components of item {item.item_id}")
    return perm


class LayoutFacet(Facet):
    """A facet rendered with the shared single-message layout (see the module docstring)."""

    #: Printed once before the ordered components (documents, tools); None for no header.
    header: ClassVar[str | None] = None
    #: What the components are called in "unsupported" messages.
    noun: ClassVar[str] = "components"

    def unsupported_reason(self, item: Item) -> str | None:
        if reason := self.foreign_kinds_reason(item) or unletterable_reason(item):
            return reason
        n = len(self.orderables(item))
        if n == 0:
            return f"{self.name} orders {self.noun}; item {item.item_id} has none"
        if n < self.min_components:
            return (f"{self.name} orders {self.noun}; item {item.item_id} has only {n} "
                    f"(needs at least {self.min_components})")
        return None

    def displayed(self, item: Item, permutation: Sequence[int]) -> tuple[Component, ...]:
        """The orderable components in display order (slot j = source ``permutation[j]``)."""
        comps = self.orderables(item)
        perm = check_permutation(self.name, item, permutation, len(comps))
        return tuple(comps[i] for i in perm)

    def context(self, item: Item) -> tuple[Component, ...]:
        """Components shown in source order because this facet does not order them."""
        ordered = {c.id for c in self.orderables(item)}
        return tuple(c for c in item.components if c.id not in ordered and c.kind != ComponentKind.CHOICE)

    def labels(self) -> Mapping[str, str]:
        """Kind -> label template: the built-in kinds' and this facet's own (`kind_labels`)."""
        return {**KIND_LABELS, **self.kind_labels}

    def add_ordered(self, b: MessageBuilder, shown: Sequence[Component], item: Item | None = None) -> None:
        """The ordered components in display order, after the facet's header. `item` is the item rendered, for a
        layout that needs more of it (its metadata): a render's state lives in its arguments, never on `self`."""
        if self.header:
            b.block(self.header)
        add_labelled(b, shown, self.labels())

    def render(self, item: Item, permutation: Sequence[int], mode: PromptMode = PromptMode.DIRECT) -> Prompt:
        self.check(item)
        mode = PromptMode(mode)
        shown = self.displayed(item, permutation)
        b = MessageBuilder("user")
        add_fixed(b, item)
        add_labelled(b, self.context(item), self.labels())
        add_ordered_of(self, b, shown, item)
        labels = add_question(b, item, self.choice_order(item, permutation), mode)
        return Prompt(system=self.system, messages=(b.message(),), mode=mode,
                      answer_format=ANSWER_FORMATS[item.answer_type], labels=labels)


@cache
def takes_item(cls: type[LayoutFacet]) -> bool:
    """Does the class's `add_ordered` take the item (self, b, shown, item), or only `(b, shown)` (the contract
    before the item was passed)?"""
    try:
        inspect.signature(cls.add_ordered).bind(None, None, None, None)
    except TypeError:
        return False
    return True


def add_ordered_of(facet: LayoutFacet, b: MessageBuilder, shown: Sequence[Component], item: Item) -> None:
    """Call the facet's `add_ordered` with the item; a plug-in written against the old `(b, shown)` signature is
    called the old way, with a FutureWarning (shown to users by default, unlike a DeprecationWarning raised in
    library code) saying how to update it."""
    if takes_item(type(facet)):
        facet.add_ordered(b, shown, item)
        return
    warnings.warn(f"{type(facet).__module__}.{type(facet).__qualname__}.add_ordered(self, b, shown) is the old "
                  "signature: add the item rendered, add_ordered(self, b, shown, item) (docs/plugins.md)",
                  FutureWarning, stacklevel=3)
    facet.add_ordered(b, shown)


def preview(prompt: Prompt) -> str:
    """A plain-text view of a prompt (images as ``<image sha256[:12]>``), for docs and debugging."""
    out = [f"[system] {prompt.system}"]
    for m in prompt.messages:
        body = "".join(p.text if isinstance(p, TextPart) else f"<image {p.image.sha256[:12]}>"
                       for p in m.parts)
        out.append(f"[{m.role}]\n{body}")
    out.append(f"(mode={prompt.mode}, answer_format={prompt.answer_format}, "
               f"labels={list(prompt.labels)}, hash={prompt.hash})")
    return "\n".join(out)


__all__ = ["LayoutFacet", "MessageBuilder", "UnsupportedItem", "preview"]
