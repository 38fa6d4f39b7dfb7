"""One small example item per facet, and a preview of its rendered prompt (used by docs/facets.md).

    python -m facet_probe.facets.examples [FACET ...] [--cot] [--perm 2,0,1] [hydra.searchpath=[file://<dir>]]

prints each facet's prompt for its example item under a permutation (default: the reversed order),
with images shown as ``<image sha256-prefix>``. The app (`__main__.py`, `conf/facet_examples_app.yaml`: `facets=`,
`mode=`, `perm=`), so a facet of a user folder or plug-in package previews exactly like a built-in one.
"""

from __future__ import annotations

import argparse
from typing import Any

from omegaconf import DictConfig

from facet_probe.core.errors import ConfigError, parse_enum
from facet_probe.core.items import Item
from facet_probe.core.prompts import PromptMode
from facet_probe.facets.example_images import RGB, square_png
from facet_probe.facets.layout import preview
from facet_probe.facets.registry import lookup, on_search_path

APP = "facet_examples_app"
TASK = "facet_probe.facets.examples:show"


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
    if sorted(perm) != list(range(n)):
        raise ConfigError(f"perm={list(perm)} is not an ordering of {facet}'s example ({n} components to order): "
                          f"give each of 0..{n - 1} once, e.g. perm=[{','.join(map(str, range(n)))}]")
    return f"{facet}, permutation {perm}:\n{preview(f.render(item, perm, PromptMode(mode)))}"


def show(cfg: DictConfig) -> None:
    """The app's task: print the preview of each facet named (none named: every facet on the search path)."""
    mode = parse_enum(PromptMode, cfg.mode, "mode")
    names = [cfg.facets] if isinstance(cfg.facets, str) else list(cfg.facets or []) or list(on_search_path())
    print("\n\n".join(example_preview(f, ordering(cfg.perm), mode) for f in names))


def ordering(value: Any) -> list[int] | None:
    """`perm=` as a list of ints (None: the default ordering); anything else is one line saying the form."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            raise TypeError(value)
        return [int(p) for p in value]  # a ListConfig or list
    except (TypeError, ValueError):
        raise ConfigError(f"perm={value}: give the ordering as a list of source indices, e.g. perm=[2,0,1] "
                          "(or --perm 2,0,1)") from None


def hydra_argv(argv: list[str]) -> list[str]:
    """The tool's first command line as the app's overrides: bare FACET names -> `facets=[...]`, `--cot` ->
    `mode=cot`, `--perm 2,0,1` -> `perm=[2,0,1]`; overrides and Hydra's flags (with their values) pass as given."""
    shape = argparse.ArgumentParser(add_help=False)
    shape.add_argument("--cot", action="store_true")
    shape.add_argument("--perm")
    known, rest = shape.parse_known_args(argv)
    named = [i for i, a in enumerate(rest) if "=" not in a and not a.startswith("-")
             and not (i and rest[i - 1].startswith("-"))]  # a word after a flag is that flag's value
    out = [a for i, a in enumerate(rest) if i not in named]
    out += [f"facets=[{','.join(rest[i] for i in named)}]"] if named else []
    out += ["mode=cot"] if known.cot else []
    out += [f"perm=[{known.perm}]"] if known.perm else []
    return out


__all__ = ["RGB", "example_item", "example_preview", "hydra_argv", "show", "square_png"]

