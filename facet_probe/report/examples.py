"""Flipped examples for report.md: per cell, a few items whose answer changed across orderings, each on one
line (its answers by ordering, right or wrong) with a link that opens it in the explorer page."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import pandas as pd

from facet_probe.core.items import Item
from facet_probe.core.trials import PARSE_ERROR
from facet_probe.core.untrusted import markdown_link_text, markdown_text
from facet_probe.metrics.flips import CELL_KEYS
from facet_probe.report.explorer.data import item_key, meaning
from facet_probe.report.explorer.page import PAGE

PER_CELL = 3


def explorer_link(facet: str, item_id: str, model: str, page: str = PAGE) -> str:
    """`explorer.html#item=<facet/item>&model=<model>`: the page opens that item for that model."""
    return f"{page}#item={quote(item_key(facet, item_id), safe='')}&model={quote(model, safe='')}"


def _short(text: str, n: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def example_line(item_trials: Sequence, item: Item | None, model: str) -> str:
    """`- [id](link) "question" — 0: pen ✓ · 1: bell ✗ · ...` (repeat 0 of each ordering): `item_trials` are the
    item's rows (named tuples: facet, item_id, ordering_idx, answer_normalized, correct), in ordering order. The
    id, question and answers are untrusted text, shown as written (`core.untrusted`), cut before they are escaped."""
    first = item_trials[0]
    answers = []
    for row in item_trials:
        said = meaning(item, row.answer_normalized)
        mark = "✓" if row.correct is True or row.correct == 1 else ("✗" if row.correct is False or row.correct == 0 else "?")
        answers.append(f"{row.ordering_idx}: {markdown_text(_short(said, 24) if said is not None else PARSE_ERROR)} "
                       f"{mark}")
    question = f' "{markdown_text(_short(item.question))}"' if item is not None else ""
    link = explorer_link(first.facet, first.item_id, model)
    return f"- [{markdown_link_text(first.item_id)}]({link}){question}: " + " · ".join(answers)


def flipped_examples(trials: pd.DataFrame, item_metrics: pd.DataFrame, items: dict[tuple[str, str], dict],
                     per_cell: int = PER_CELL) -> dict[tuple, list[str]]:
    """Cell -> up to `per_cell` example lines of flipped items (the first by item id)."""
    flipped = item_metrics[item_metrics["any_flip"] == 1].sort_values([*CELL_KEYS, "item_id"])
    picked = flipped.groupby(CELL_KEYS, sort=True).head(per_cell)
    if picked.empty:
        return {}
    keys = picked[[*CELL_KEYS, "item_id"]].astype(str)
    shown = [c for c in (*CELL_KEYS, "item_id", "ordering_idx", "repeat_idx", "answer_normalized", "correct")
             if c in trials]  # only what a line shows: 400k-trial frames carry dozens of columns
    # only the picked items' rows (a few thousand of 400k: copying every row was 40 MB and 0.1 s)
    t = trials.loc[trials["item_id"].astype(str).isin(set(keys["item_id"])), shown]
    t = t.assign(**{k: t[k].astype(str) for k in [*CELL_KEYS, "item_id"]})
    rep = t["repeat_idx"] if "repeat_idx" in t else pd.Series(0, index=t.index)
    t = t[rep.fillna(0) == 0].merge(keys, on=[*CELL_KEYS, "item_id"]).sort_values([*CELL_KEYS, "item_id", "ordering_idx"])
    groups: dict[tuple, list] = {}
    for row in t.itertuples(index=False):  # one pass over the picked items' rows (a group's frame each cost 1 ms)
        groups.setdefault((row.model, row.facet, row.dataset, row.item_id), []).append(row)
    out: dict[tuple, list[str]] = {}
    for (model, facet, dataset, item_id), group in sorted(groups.items(), key=lambda kv: kv[0]):
        rec = items.get((dataset, item_id))
        try:
            item = Item.model_validate(rec) if rec is not None else None
        except ValueError:
            item = None
        out.setdefault((model, facet, dataset), []).append(example_line(group, item, model))
    return out


def render_examples(examples: dict[tuple, list[str]]) -> list[str]:
    """The report's section: per cell its lines (answers by ordering: meaning, right or wrong)."""
    if not examples:
        return []
    parts = ["## Flipped examples", "", f"Up to {PER_CELL} flipped items per cell: the answer (its meaning) under "
             "each ordering, ✓ right / ✗ wrong. A link opens the item in `explorer.html` with its orderings "
             "side by side.", ""]
    for (model, facet, dataset), lines in examples.items():
        parts += [f"**{markdown_text(f'{model} / {facet} / {dataset}')}**", "", *lines, ""]
    return parts[:-1]
