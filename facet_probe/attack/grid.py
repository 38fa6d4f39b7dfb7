"""The runs of one budget folder and the tables' columns, from the objectives present (no list of attacks).

A budget folder (``<model>/<dataset>/eps16-a1-s200-u10/``) holds one run folder per attack x mode. Its tables
have, per mode present (w/o CoT, then w/ CoT), a "no attack" column (the `attack=none` run, whose objective is
null, else the clean pass of any run of that mode) and then a column per attack run. A column is named by the
objective's declared `title` (the built-ins: "answer attack", ...; a plug-in without one: its config's `name`)
plus the objective settings set away from the class's defaults (``option_margin (kappa=1.0)``, the run
folder's suffix), and placed by the objective's `table_order`, then by name. Runs record these in their
`summary.json` (`column_meta`); for a summary written before they were recorded, the class named in the run's
`attack_settings.json` gives them, else the attack's name.
"""

from __future__ import annotations

import json
import pydoc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facet_probe.attack.config import budget_name, objective_changes
from facet_probe.attack.loop import LoopRules, folder_label

NO_ATTACK = "none"  # conf/attack/none.yaml (objective: null): the clean accuracy
MODES = {"direct": "w/o CoT", "cot": "w/ CoT"}  # the tables' order of the prompt modes
NO_ATTACK_TITLE = "no attack"
LAST = 100  # where an attack that declares no order sits (`Objective.table_order`'s default)


def pct(x: float | None) -> str:
    """A share as the tables print it (``-`` for none)."""
    return "-" if x is None else f"{100 * x:.1f}"


def column_meta(objective: Any, loop: LoopRules | None = None) -> dict[str, Any]:
    """How the tables name and place a run's column and read its success (written to its summary.json; not a
    setting, so never checked on resume): the objective's title, order and changed settings, the loop's name and
    the rule `success` follows (`attack.loop`)."""
    changes = objective_changes(objective)
    loop = loop or LoopRules()
    return {"attack_title": NO_ATTACK_TITLE if objective is None else objective.title,
            "attack_order": -1 if objective is None else objective.table_order,
            "attack_variant": ", ".join(changes) or None, "loop": loop.name,
            "success_rule": None if objective is None else loop.success_rule(objective)}


@dataclass(frozen=True)
class Column:
    """One column of the tables: a mode and an attack run (`attack`: its key, the attack's name plus its changed
    objective settings), the title it is shown under, and its place among the mode's attacks."""

    mode: str
    attack: str
    title: str
    order: int = LAST

    @property
    def key(self) -> tuple[str, str]:
        return self.mode, self.attack

    @property
    def heading(self) -> str:
        """``w/ CoT: answer attack``."""
        return f"{MODES.get(self.mode, self.mode)}: {self.title}"

    @property
    def attacks(self) -> bool:
        """Whether the column is an attack (not the no-attack column)."""
        return self.attack != NO_ATTACK


def _declared(run_dir: Path) -> tuple[str | None, int]:
    """The title and order the objective class named in a run's attack_settings.json declares (older runs)."""
    from facet_probe.attack.objectives.base import Objective  # noqa: PLC0415

    path = run_dir / "attack_settings.json"
    target = ((json.loads(path.read_text()).get("objective") or {}) if path.is_file() else {}).get("_target_")
    try:
        cls = pydoc.locate(target) if target else None  # None, quietly, for a plug-in not on this machine's path
    except pydoc.ErrorDuringImport:  # its module fails to import here: its name stands in
        cls = None
    if isinstance(cls, type) and issubclass(cls, Objective):
        return cls.title, cls.table_order
    return None, LAST


def run_column(summary: dict, run_dir: Path) -> Column:
    """The column of one run, from its summary (see the module docstring)."""
    name, variant = summary["attack"], summary.get("attack_variant")
    if "attack_title" in summary:
        title, order = summary["attack_title"], summary.get("attack_order", LAST)
    elif name == NO_ATTACK:
        title, order = NO_ATTACK_TITLE, -1
    else:
        title, order = _declared(run_dir)
    suffix = f" ({variant})" if variant else ""
    return Column(summary["mode"], name + suffix, (title or name) + suffix, int(order))


def ordered(columns: list[Column]) -> list[Column]:
    """Each mode present (w/o CoT first) with its no-attack column, then its attacks by (order, name); two
    attacks shown under one title are told apart by their names."""
    modes = sorted({c.mode for c in columns}, key=lambda m: (list(MODES).index(m) if m in MODES else len(MODES), m))
    out = []
    for mode in modes:
        mine = {c.attack: c for c in columns if c.mode == mode}
        none = mine.pop(NO_ATTACK, Column(mode, NO_ATTACK, NO_ATTACK_TITLE, -1))
        attacks = sorted(mine.values(), key=lambda c: (c.order, c.attack))
        titles = [c.title for c in attacks]
        out += [none, *(Column(c.mode, c.attack, f"{c.title} ({c.attack})" if titles.count(c.title) > 1 else c.title,
                               c.order) for c in attacks)]
    return out


@dataclass
class Grid:
    """A budget folder's finished runs: (mode, attack) -> summary and results rows, one run's recorded settings,
    and the tables' columns."""

    folder: Path
    summaries: dict[tuple[str, str], dict] = field(default_factory=dict)
    rows: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    columns: list[Column] = field(default_factory=list)

    @property
    def budget(self) -> str:
        """``eps16-a1-s200-u10[-loop_<name>]``: the budget and loop its runs recorded (the folder's name for runs
        that recorded none)."""
        s = next(iter(self.summaries.values()), {})
        try:
            return budget_name(s["eps_255"], s["alpha_255"], s["steps"], s["update_every"], s.get("seed", 0),
                               folder_label(s.get("loop")))
        except (KeyError, TypeError, ValueError):
            return self.folder.name

    def column(self, key: tuple[str, str]) -> Column:
        return next(c for c in self.columns if c.key == key)

    def attack_columns(self, mode: str | None = None) -> list[Column]:
        """The attack columns (of `mode`, when given), in the tables' order."""
        return [c for c in self.columns if c.attacks and (mode is None or c.mode == mode)]


def read_grid(group_dir: Path) -> Grid:
    """The finished runs (a `summary.json`) in a budget folder; a run's rows when it kept its results.jsonl."""
    grid = Grid(group_dir)
    found = []
    for path in sorted(group_dir.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        column = run_column(summary, path.parent)
        grid.summaries[column.key] = summary
        found.append(column)
        results = path.parent / "results.jsonl"
        if results.exists():
            grid.rows[column.key] = [json.loads(ln) for ln in results.read_text().splitlines() if ln.strip()]
        recorded = path.parent / "attack_settings.json"
        if recorded.exists() and not grid.settings:
            grid.settings = json.loads(recorded.read_text())
    grid.columns = ordered(found)
    return grid
