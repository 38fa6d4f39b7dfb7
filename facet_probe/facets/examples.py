"""One small example item per facet, and a preview of its rendered prompt (used by docs/facets.md).

    python -m facet_probe.facets.examples [FACET ...] [--cot] [--perm 2,0,1]

prints each facet's prompt for its example item under a permutation (default: the reversed order),
with images shown as ``<image sha256-prefix>``.
"""

from __future__ import annotations

import argparse

from facet_probe.facets.example_images import RGB, square_png
from facet_probe.facets.layout import preview
from facet_probe.facets.registry import lookup, on_search_path
from facet_probe.items import Item
from facet_probe.prompts import PromptMode


def example_item(facet: str) -> Item:
    """A small, valid item that `facet` can order: its class's `example()`."""
    return lookup(facet).example()


def example_preview(facet: str, permutation: list[int] | None = None,
                    mode: PromptMode | str = PromptMode.DIRECT) -> str:
    """The preview of `facet`'s prompt for its example item (default permutation: reversed)."""
    f = lookup(facet)()
    item = example_item(facet)
    n = len(f.orderables(item))
    perm = list(range(n))[::-1] if permutation is None else permutation
    return f"{facet}, permutation {perm}:\n{preview(f.render(item, perm, mode))}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("facets", nargs="*", default=None)
    ap.add_argument("--cot", action="store_true", help="chain-of-thought mode (default: direct)")
    ap.add_argument("--perm", help="comma-separated permutation (default: reversed order)")
    args = ap.parse_args(argv)
    perm = [int(x) for x in args.perm.split(",")] if args.perm else None
    mode = PromptMode.COT if args.cot else PromptMode.DIRECT
    names = args.facets or list(on_search_path())
    print("\n\n".join(example_preview(f, perm, mode) for f in names))


__all__ = ["RGB", "example_item", "example_preview", "main", "square_png"]


if __name__ == "__main__":
    main()
