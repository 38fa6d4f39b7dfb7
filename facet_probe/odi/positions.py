"""Where an ordering puts the gold / supporting component: first, middle or last display slot.

The positional ODI variant indexes its systematic term by these three positions, which mean the
same thing for every item (unlike an ordering *index*). For option_order the located component is
the gold choice (slot = position of `gold_index` in the permutation); for every other facet it is
each component whose metadata says ``supporting: True`` (slots read from the trial's
`component_ids`, which list source component ids in display order). An ordering with several
supporting components spreads its weight evenly over their positions.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

POSITIONS = ("first", "middle", "last")
OPTION_FACET = "option_order"


@dataclass(frozen=True)
class ItemFacts:
    """What the positional variant needs to know about an item (from the run's `items.jsonl`)."""

    gold_index: int | None = None
    supporting: frozenset[str] = frozenset()
    component_ids: tuple[str, ...] = ()  # source order; maps a bare permutation to ids


def facts_from_items(items: Iterable) -> dict[str, ItemFacts]:
    """ItemFacts per item id from `facet_probe.core.items.Item` objects (or their JSON dicts)."""
    facts: dict[str, ItemFacts] = {}
    for item in items:
        rec = item if isinstance(item, Mapping) else item.model_dump(mode="json")
        comps = rec.get("components") or ()
        facts[rec["item_id"]] = ItemFacts(
            gold_index=rec.get("gold_index"),
            supporting=frozenset(c["id"] for c in comps if (c.get("metadata") or {}).get("supporting")),
            component_ids=tuple(c["id"] for c in comps))
    return facts


def slot_position(slot: int, n_slots: int) -> int:
    """0 (first), 1 (middle) or 2 (last) for display slot `slot` of `n_slots`."""
    if n_slots < 2:
        raise ValueError(f"a position needs at least 2 display slots, got {n_slots}")
    if not 0 <= slot < n_slots:
        raise ValueError(f"slot {slot} is outside 0..{n_slots - 1}")
    if slot == 0:
        return 0
    return 2 if slot == n_slots - 1 else 1


def gold_index_from_letter(letter: str | None, n_options: int) -> int | None:
    """Source index of a gold MCQ letter ('A' -> 0), or None when it is not a letter among the options."""
    if not isinstance(letter, str) or len(letter.strip()) != 1:
        return None
    idx = string.ascii_uppercase.find(letter.strip().upper())
    return idx if 0 <= idx < n_options else None


def located_slots(facet: str, permutation: Sequence[int], component_ids: Sequence[str] | np.ndarray | None,
                  facts: ItemFacts | None, gold_letter: str | None = None) -> list[int]:
    """Display slots of the gold choice (option_order) or the supporting components (other facets).

    Returns [] when the item does not say which component is gold / supporting.
    """
    perm = [int(p) for p in permutation]
    if facet == OPTION_FACET:
        gold = facts.gold_index if facts is not None and facts.gold_index is not None else None
        if gold is None:
            gold = gold_index_from_letter(gold_letter, len(perm))
        return [perm.index(gold)] if gold is not None and gold in perm else []
    if facts is None or not facts.supporting:
        return []
    ids = list(component_ids) if component_ids is not None and len(component_ids) else None
    if ids is None:
        if len(facts.component_ids) != len(perm):
            return []
        ids = [facts.component_ids[p] for p in perm]
    return [slot for slot, cid in enumerate(ids) if cid in facts.supporting]


def position_weights(slots: Sequence[int], n_slots: int) -> np.ndarray:
    """Weights over (first, middle, last): the share of located components in each position."""
    weights = np.zeros(len(POSITIONS), dtype=np.float32)
    for slot in slots:
        weights[slot_position(slot, n_slots)] += 1.0 / len(slots)
    return weights
