"""One small example item per facet, and a preview of its rendered prompt (used by docs/facets.md).

    python -m facet_probe.facets.examples [FACET ...] [--cot] [--perm 2,0,1]

prints each facet's prompt for its example item under a permutation (default: the reversed order),
with images shown as ``<image sha256-prefix>``.
"""

from __future__ import annotations

import argparse
import struct
import zlib

from facet_probe.facets import FACETS
from facet_probe.facets.layout import preview
from facet_probe.items import Component, ImageRef, Item, make_item
from facet_probe.prompts import PromptMode

#: The colours of the example images.
RGB = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 220), "yellow": (240, 210, 30)}


def square_png(color: str, size: int = 16) -> ImageRef:
    """A plain coloured square as PNG bytes, encoded here (uncompressed deflate) so its digest, and
    the example prompts' hashes in docs/facets.md, do not depend on the Pillow or zlib build."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    row = b"\x00" + bytes(RGB[color]) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * size, 0))
           + chunk(b"IEND", b""))
    return ImageRef.from_bytes(png)


def _c(id: str, kind: str, text: str = "", **kw) -> Component:
    return Component(id=id, kind=kind, text=text, **kw)


def example_item(facet: str) -> Item:
    """A small, valid item that `facet` can order."""
    if facet == "option_order":
        return make_item(item_id="example::option", dataset="example",
                         question="Which shape is shown in the figure?",
                         fixed=(_c("figure", "image", image=square_png("red")),),
                         choices=("circle", "square", "triangle", "star"), gold_index=1)
    if facet == "evidence_chunk_order":
        return make_item(item_id="example::evidence", dataset="example", answer_type="free",
                         question="Where does Ann live?", gold_answer="Oslo",
                         components=(_c("c0", "text_chunk", "Ann lives in Oslo."),
                                     _c("c1", "text_chunk", "Bob lives in Rome."),
                                     _c("c2", "text_chunk", "Oslo is cold in winter.")))
    if facet == "document_rank_order":
        return make_item(item_id="example::docs", dataset="example", answer_type="free",
                         question="Which river flows through Paris?", gold_answer="Seine",
                         components=(_c("d0", "document", "Paris\nThe Seine flows through Paris.", title="Paris"),
                                     _c("d1", "document", "The Tiber flows through Rome.", title="Rome"),
                                     _c("d2", "document", "The Thames flows through London.", title="London")))
    if facet == "image_set_order":
        return make_item(item_id="example::images", dataset="example",
                         question="How many of the images are blue?",
                         components=(_c("i0", "image", image=square_png("blue")),
                                     _c("i1", "image", image=square_png("green")),
                                     _c("i2", "image", image=square_png("blue"))),
                         choices=("0", "1", "2", "3"), gold_index=2)
    if facet == "mixed_modality_order":
        return make_item(item_id="example::mixed", dataset="example", answer_type="free",
                         question="What colour is the flag Ann painted?", gold_answer="green",
                         components=(_c("t0", "text_chunk", "Ann and Bob each painted a flag."),
                                     _c("m0", "image", "Painted by Bob.", image=square_png("yellow")),
                                     _c("t1", "text_chunk", "Bob likes yellow."),
                                     _c("m1", "image", "Painted by Ann.", image=square_png("green"))))
    if facet == "dialog_turn_order":
        return make_item(item_id="example::dialog", dataset="example", answer_type="free",
                         question="Which colour does Ann like?", gold_answer="red",
                         components=(_c("u0", "dialog_turn", "Ann likes red.", role="user"),
                                     _c("a0", "dialog_turn", "Noted.", role="assistant"),
                                     _c("u1", "dialog_turn", "Bob likes blue.", role="user")))
    if facet == "few_shot_order":
        return make_item(item_id="example::fewshot", dataset="example", answer_type="free",
                         question="What is the plural of mouse?", gold_answer="mice",
                         components=(_c("e0", "few_shot", "What is the plural of goose?", answer="geese"),
                                     _c("e1", "few_shot", "What is the plural of child?", answer="children"),
                                     _c("e2", "few_shot", "What is the plural of foot?", answer="feet")))
    if facet == "tool_description_order":
        return make_item(item_id="example::tools", dataset="example", answer_type="tool",
                         question="What will the weather be in Oslo tomorrow?", gold_answer="get_forecast",
                         components=(_c("f0", "tool", "Returns the current time in a city.", title="get_time"),
                                     _c("f1", "tool", "Returns the weather forecast for a city and day.",
                                        title="get_forecast"),
                                     _c("f2", "tool", "Converts an amount between currencies.",
                                        title="convert_currency")))
    raise KeyError(f"unknown facet {facet!r}; known: {sorted(FACETS)}")


def example_preview(facet: str, permutation: list[int] | None = None,
                    mode: PromptMode | str = PromptMode.DIRECT) -> str:
    """The preview of `facet`'s prompt for its example item (default permutation: reversed)."""
    f = FACETS[facet]()
    item = example_item(facet)
    n = len(f.orderables(item))
    perm = list(range(n))[::-1] if permutation is None else permutation
    return f"{facet}, permutation {perm}:\n{preview(f.render(item, perm, mode))}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("facets", nargs="*", default=list(FACETS))
    ap.add_argument("--cot", action="store_true", help="chain-of-thought mode (default: direct)")
    ap.add_argument("--perm", help="comma-separated permutation (default: reversed order)")
    args = ap.parse_args(argv)
    perm = [int(x) for x in args.perm.split(",")] if args.perm else None
    mode = PromptMode.COT if args.cot else PromptMode.DIRECT
    print("\n\n".join(example_preview(f, perm, mode) for f in args.facets))


if __name__ == "__main__":
    main()
