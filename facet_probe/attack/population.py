"""Table 1 on one population, as "Stop Reasoning!" reports it: the grid's runs joined on the item.

The paper attacks "samples that were correctly predicted and involved a reasoning process" and scores
every column, w/o CoT included, on that one set. Here the population is the items whose clean reply with
CoT is correct and has a rationale (selected in every w/ CoT run of the grid), that every run of the
table holds, and that no run failed on (`POPULATION_RULE`). On it, a column's accuracy counts each item
with the run's final answer (the adversarial one when the run attacked it, else the clean one: a w/o CoT
item answered wrongly on the clean image stays wrong), and its success rate is over the items that run
attacked (by the run's success rule, `success`; and by the reference's, a wrong answer, `reference_success`).
W/ CoT without an attack is 100 % by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from facet_probe.attack.grid import NO_ATTACK
from facet_probe.attack.loop import wrong_answer

POPULATION_RULE = ("Population: the items whose clean reply with CoT is correct and gives a rationale (selected "
                   "in every w/ CoT run), held by every run of the table and failed by none; every column is "
                   "scored on these items (the paper's Table 1 rule).")

Runs = Mapping[tuple[str, str], Sequence[dict]]  # (mode, attack) -> the run's results rows


@dataclass(frozen=True)
class Population:
    """The joined items, why the others held by every run are out (counts per reason), and the items some run
    lacks (item -> the runs without it)."""

    items: tuple[str, ...]
    candidates: int  # items held by every run
    dropped: dict[str, int] = field(default_factory=dict)
    missing: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


def item_key(row: dict) -> str:
    """What the runs are joined on: the item id (the sample id for rows written without one)."""
    return row.get("item_id") or row["sample_id"]


def final_correct(row: dict) -> bool:
    """Whether the run's final answer to the item is correct (adversarial when attacked, else clean)."""
    return bool(row["adv_correct"]) if row.get("attacked") else bool(row["clean_correct"])


def reference_success(row: dict) -> bool:
    """Whether an attacked row succeeded by the reference's rule (a wrong final answer; targeted: the target),
    read from rows written before the field was recorded too."""
    if "reference_success" in row:
        return bool(row["reference_success"])
    return wrong_answer(row.get("adv_answer"), bool(row.get("adv_correct")), row.get("target"))


def population(runs: Runs) -> Population:
    """The items every column is scored on (see `POPULATION_RULE`); empty without a w/ CoT run."""
    by_run = {key: {item_key(r): r for r in rows} for key, rows in runs.items()}
    cot = [rows for (mode, _), rows in by_run.items() if mode == "cot"]
    if not cot:
        return Population((), 0, {"no w/ CoT run": 0})
    order = list(next(iter(cot)))
    common = [i for i in order if all(i in rows for rows in by_run.values())]
    held = dict.fromkeys(i for rows in by_run.values() for i in rows)
    missing = {i: tuple(key for key, rows in by_run.items() if i not in rows) for i in held}
    dropped: dict[str, int] = {}
    keep = []
    for item in common:
        reasons = [rows[item]["selection_reason"] for rows in cot if not rows[item]["selected"]]
        if any(rows[item].get("error") for rows in by_run.values()):
            reason = "attack error"
        elif reasons:
            reason = f"w/ CoT clean reply: {reasons[0]}"
        else:
            keep.append(item)
            continue
        dropped[reason] = dropped.get(reason, 0) + 1
    return Population(tuple(keep), len(common), dropped, {i: keys for i, keys in missing.items() if keys})


def clean_column(runs: Runs, mode: str) -> list[dict] | None:
    """The `none` run of `mode`, else the clean pass of any run of that mode (as unattacked rows)."""
    if (mode, NO_ATTACK) in runs:
        return list(runs[(mode, NO_ATTACK)])
    for (m, _), rows in runs.items():
        if m == mode:
            return [{**r, "attacked": False, "success": False} for r in rows]
    return None


def table1_cells(runs: Runs, pop: Population, columns: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """(mode, attack) -> accuracy, success rate and counts on the population, for each of `columns` (the
    grid's, `attack.grid`) whose run has rows."""
    items = set(pop.items)
    out = {}
    for mode, attack in columns:
        rows = clean_column(runs, mode) if attack == NO_ATTACK else runs.get((mode, attack))
        if rows is None:
            continue
        mine = [r for r in rows if item_key(r) in items]
        attacked = [r for r in mine if r.get("attacked")]
        out[(mode, attack)] = {
            "n": len(mine), "correct": sum(map(final_correct, mine)),
            "accuracy": sum(map(final_correct, mine)) / len(mine) if mine else None,
            "attacked": len(attacked), "successes": sum(bool(r.get("success")) for r in attacked),
            "success_rate": (sum(bool(r.get("success")) for r in attacked) / len(attacked)) if attacked else None,
            "reference_successes": sum(map(reference_success, attacked)),
            "reference_success_rate": sum(map(reference_success, attacked)) / len(attacked) if attacked else None,
        }
    return out
