"""Print an example item of each synthetic set: `python -m facet_probe.datasets.synthetic [set ...]`.

The examples in docs/synthetic.md are this output (a test keeps them in sync with the generators).
"""

from __future__ import annotations

import sys

from facet_probe.core.items import Component, Item
from facet_probe.datasets.synthetic import GENERATOR_VERSION, SYNTHETIC_SETS


def describe_component(comp: Component) -> str:
    """One line per component: kind, role/title, text or picture, answer, supporting flag."""
    head = str(comp.kind) + (f" ({comp.role})" if comp.role else "") + (f" [{comp.title}]" if comp.title else "")
    if comp.image is not None:
        objects = comp.metadata.get("scene") or [comp.metadata]
        shown = ", ".join(f"{o['colour']} {o['shape']}" for o in objects)
        body = f"<{comp.image.to_pil().size[0]}px picture: {shown}>"
    else:
        body = comp.text
    extra = f" -> {comp.answer}" if comp.answer else ""
    flag = " (supporting)" if comp.metadata.get("supporting") else ""
    return f"{comp.id}: {head}: {body}{extra}{flag}"


def describe_item(item: Item) -> str:
    lines = [f"item_id: {item.item_id}", f"question: {item.question}"]
    lines += [f"fixed {describe_component(c)}" for c in item.fixed]
    lines += [describe_component(c) for c in item.components]
    if item.choices:
        lines.append("choices: " + " | ".join(item.choices) + f"  (gold_index {item.gold_index})")
    lines.append(f"gold: {item.gold}  ({item.answer_type})")
    lines.append(f"task: {item.metadata['task']}, generator_version: {item.metadata['generator_version']}")
    return "\n".join(lines)


def example(name: str, index: int = 0) -> str:
    """The item at `index` of the test split (seed 42, default options), described."""
    return describe_item(SYNTHETIC_SETS[name](name=name, n=index + 1).load()[index])


def main(argv: list[str]) -> int:
    names = argv or sorted(SYNTHETIC_SETS)
    unknown = [n for n in names if n not in SYNTHETIC_SETS]
    if unknown:
        print(f"unknown set(s) {unknown}; known: {', '.join(sorted(SYNTHETIC_SETS))}", file=sys.stderr)
        return 2
    print(f"# synthetic generator version {GENERATOR_VERSION}")
    for name in names:
        print(f"\n## {name}\n```text\n{example(name)}\n```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
