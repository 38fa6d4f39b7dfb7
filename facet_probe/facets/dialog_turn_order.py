"""dialog_turn_order: the earlier turns of a conversation, permuted, as real chat messages.

Turns keep their roles and are shown in display order as chat messages. Chat templates and
providers want alternating roles starting with the user, so:

- consecutive turns of the same role (after permutation) are merged into one message, their texts
  separated by a blank line (images kept in place);
- the item's fixed context, and components this facet does not order, open the first user message;
- when the first displayed turn is the assistant's and nothing precedes it, a user message with the
  fixed text `DIALOG_OPENING` ("Hello.") is put first;
- the question, the options and the answer instruction go in the final user message: appended to
  the last turn when that is a user turn, else as a new user message.

Only user turns may carry images (providers reject images in assistant messages).
"""

from __future__ import annotations

from collections.abc import Sequence

from facet_probe.core.items import Component, ComponentKind, Item, make_item
from facet_probe.core.prompts import Prompt, PromptMode
from facet_probe.facets import prompts as P
from facet_probe.facets.layout import (
    ANSWER_FORMATS,
    LayoutFacet,
    MessageBuilder,
    add_fixed,
    add_labelled,
    add_question,
)


class DialogTurnOrder(LayoutFacet):
    name = "dialog_turn_order"
    kinds = (ComponentKind.DIALOG_TURN,)
    rank = 6
    system = P.DIALOG_SYSTEM_PROMPT
    noun = "dialog turns"

    @classmethod
    def example(cls) -> Item:
        """A small item this facet can order (docs/facets.md)."""
        return make_item(item_id="example::dialog", dataset="example", answer_type="free",
                         question="Which colour does Ann like?", gold_answer="red",
                         components=(Component(id="u0", kind="dialog_turn", text="Ann likes red.", role="user"),
                                     Component(id="a0", kind="dialog_turn", text="Noted.", role="assistant"),
                                     Component(id="u1", kind="dialog_turn", text="Bob likes blue.", role="user")))

    def unsupported_reason(self, item: Item) -> str | None:
        for c in self.orderables(item):
            if c.role == "assistant" and c.image is not None:
                return (f"dialog_turn_order: assistant turn {c.id!r} of item {item.item_id} carries an "
                        "image; providers accept images only in user turns")
        return super().unsupported_reason(item)

    def render(self, item: Item, permutation: Sequence[int], mode: PromptMode = PromptMode.DIRECT) -> Prompt:
        self.check(item)
        mode = PromptMode(mode)
        shown = self.displayed(item, permutation)
        builders: list[MessageBuilder] = []
        opening = MessageBuilder("user")
        add_fixed(opening, item)
        add_labelled(opening, self.context(item), self.labels())
        if opening.parts:
            builders.append(opening)
        for turn in shown:
            if not builders or builders[-1].role != turn.role:
                builders.append(MessageBuilder(turn.role))  # type: ignore[arg-type]  # a turn's role: user or assistant (the item's validator)
            b = builders[-1]
            if turn.image is not None:
                b.image(turn.image)
            if turn.text.strip():
                b.block(turn.text.strip(), caption=turn.image is not None)
        if builders[0].role != "user":
            first = MessageBuilder("user")
            first.block(P.DIALOG_OPENING)
            builders.insert(0, first)
        if builders[-1].role != "user":
            builders.append(MessageBuilder("user"))
        labels = add_question(builders[-1], item, self.choice_order(item, permutation), mode)
        return Prompt(system=self.system, messages=tuple(b.message() for b in builders),
                      mode=mode, answer_format=ANSWER_FORMATS[item.answer_type], labels=labels)
