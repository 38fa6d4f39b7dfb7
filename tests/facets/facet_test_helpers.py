"""Helpers of the facet tests: items built with `make_item`, images are tiny in-memory PNGs."""

from __future__ import annotations

import io

from PIL import Image

from facet_probe.core.items import Component, ImageRef, make_item


def png(color: str | tuple[int, int, int], size: int = 8) -> ImageRef:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, format="PNG")
    return ImageRef.from_bytes(buf.getvalue())


def comp(id: str, kind: str, text: str = "", **kw) -> Component:
    return Component(id=id, kind=kind, text=text, **kw)


COLORS = ["red", "green", "blue", "yellow", "purple"]


def from_example(facet_cls, n: int = 4):
    """A test item for a facet without one below: its example item's orderables, cycled to `n` components
    (ids made unique), source component i's text starting with ``src{i}``."""
    example = facet_cls.example()
    orderables = facet_cls().orderables(example)
    ordered = tuple(c.model_copy(update={"id": f"{c.id}_{i}", "text": f"src{i} {c.text}"})
                    for i, c in ((i, orderables[i % len(orderables)]) for i in range(n)))
    context = tuple(c for c in example.components if c not in orderables)
    return make_item(**{**example.model_dump(), "components": (*context, *ordered)})


def facet_items():
    """One supported item per facet (a new facet's from its example); source component i's text contains
    ``src{i}``."""
    from facet_probe.facets import FACETS

    written = {
        "option_order": make_item(
            item_id="t::opt", dataset="t", question="Pick the gold option.",
            choices=("src0 apple", "src1 pear", "src2 plum", "src3 fig"), gold_index=2),
        "evidence_chunk_order": make_item(
            item_id="t::ev", dataset="t", question="Where does Ann live?", answer_type="free",
            gold_answer="Oslo",
            components=tuple(comp(f"c{i}", "text_chunk", f"src{i} fact number {i}.") for i in range(4)),
            choices=()),
        "document_rank_order": make_item(
            item_id="t::doc", dataset="t", question="Which document?", answer_type="free", gold_answer="x",
            components=tuple(comp(f"d{i}", "document", f"src{i} body of doc {i}.", title=f"Title {i}")
                             for i in range(4))),
        "image_set_order": make_item(
            item_id="t::img", dataset="t", question="Which colour is missing?",
            components=tuple(comp(f"i{i}", "image", f"src{i} caption", image=png(COLORS[i])) for i in range(4)),
            choices=("black", "white"), gold_index=0),
        "mixed_modality_order": make_item(
            item_id="t::mix", dataset="t", question="What is shown?", answer_type="free", gold_answer="red",
            components=(comp("t0", "text_chunk", "src0 text"), comp("m1", "image", "src1 pic", image=png("red")),
                        comp("t2", "text_chunk", "src2 text"), comp("m3", "image", "src3 pic", image=png("blue")))),
        "dialog_turn_order": make_item(
            item_id="t::dia", dataset="t", question="What does Ann like?", answer_type="free", gold_answer="tea",
            components=(comp("u0", "dialog_turn", "src0 Ann likes tea.", role="user"),
                        comp("a1", "dialog_turn", "src1 Noted.", role="assistant"),
                        comp("u2", "dialog_turn", "src2 Bob likes coffee.", role="user"),
                        comp("a3", "dialog_turn", "src3 Got it.", role="assistant"))),
        "few_shot_order": make_item(
            item_id="t::few", dataset="t", question="Plural of mouse?", answer_type="free", gold_answer="mice",
            components=tuple(comp(f"e{i}", "few_shot", f"src{i} plural of word{i}?", answer=f"words{i}")
                             for i in range(4))),
        "tool_description_order": make_item(
            item_id="t::tool", dataset="t", question="Weather in Oslo?", answer_type="tool",
            gold_answer="tool_2",
            components=tuple(comp(f"f{i}", "tool", f"src{i} does thing {i}.", title=f"tool_{i}")
                             for i in range(4))),
    }
    return {name: written[name] if name in written else from_example(cls) for name, cls in FACETS.items()}
