"""`attack-tables`: the attack app's tables (Stop Reasoning! Table 1 on one population, Table 2, the per-run
table) of every attack budget folder under the inputs, computed by `facet_probe.attack` (never re-implemented
here) and written beside the other targets, one row per budget folder and column."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from facet_probe.paper import render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput
from facet_probe.store.run_folder import folders_under


def budget_folders(paths: list[Path]) -> list[Path]:
    """The attack budget folders under the inputs: the parents of finished attack runs (a run folder holds
    `results.jsonl` and a `summary.json` that names its mode and attack)."""
    found = set()
    for path in paths:
        for run in folders_under(path, lambda f: (f / "results.jsonl").is_file()):
            summary = run / "summary.json"
            if summary.is_file() and {"mode", "attack"} <= set(json.loads(summary.read_text())):
                found.add(run.parent)
    return sorted(found)


def group_tables(group: Path) -> tuple[str, dict[str, list[dict]]]:
    """One budget folder's budget label (``eps16-a1-s200-u10``) and its tables as the attack app computes them:
    `runs` (tables.group_table), `table1` (report.table1, one population, the paper's row beside), `table2`
    (report.table2 with the judgments cached in the folder; nothing is judged or written here)."""
    from facet_probe.attack import report, tables
    from facet_probe.attack.grid import read_grid
    from facet_probe.attack.population import population
    from facet_probe.attack.rationale_judge import cached_judgments

    grid = read_grid(group)
    _, per_run = tables.group_table(group)
    _, table1 = report.table1(grid)
    attacked = report.attacked_cot(grid, set(population(grid.rows).items))
    flat = [{**r, "attack": a} for a, rows in attacked.items() for r in rows]
    _, table2 = report.table2(attacked, cached_judgments(flat, group), grid.settings) if flat else ("", [])
    return grid.budget, {"runs": per_run, "table1": table1, "table2": table2}


CAPTIONS = {
    "table1": ("Stop Reasoning! Table 1 on one population per budget folder (the attack app's rule: items whose "
               "clean reply with CoT is correct and gives a rationale, held by every run, failed by none); accuracy "
               "and attack success per column (one per attack run, named by its objective): `success_rate` by the "
               "run's rule (stop-reasoning: a wrong answer given in the first sentence, unless the run used "
               "attack/loop=reference), `reference_success_rate` by the reference's (a wrong answer, 1 - accuracy); "
               "rows model=paper:<name> are the paper's accuracies where model family x dataset match."),
    "table2": ("Stop Reasoning! Table 2: successful attacks with CoT whose rationale changed, mechanically and by "
               "the LLM judge (cached judgments only; judge with `python -m facet_probe.attack.tables <folder> "
               "--judge <name>`)."),
    "runs": ("Per attack run: accuracy, success rate (by `success_rule`; `reference_success_rate`: a wrong answer), "
             "rationale changes and skips (the attack app's table.csv)."),
}


def caption(name: str, frame: pd.DataFrame) -> str:
    """The table's caption; Table 2's says which rows had no successful attack (their shares are empty, not 0)."""
    text = CAPTIONS[name]
    if name == "table2" and (frame["successes"] == 0).any():
        empty = frame[frame["successes"] == 0]
        text += (" Rows with no successful attack (" + ", ".join(
            f"{r.model} {r.budget} {r.attack}: 0 of {r.attacked} attacked" for r in empty.itertuples())
            + ") have no rationale change to count: their shares are empty, not 0 (column note).")
    return text


def attack_tables(paths: list[Path], out: Path) -> list[Path]:
    """`attack_table1`, `attack_table2` and `attack_runs` (CSV + LaTeX) over every budget folder; `budget` is the
    folder's budget label (model and dataset are columns of their own)."""
    groups = budget_folders(paths)
    if not groups:
        raise MissingInput("no attack run under the inputs (no results.jsonl beside an attack summary.json): run "
                           "`python -m facet_probe.attack ...` and give its output folder (docs/attacks.md)")
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in CAPTIONS}
    for group in groups:
        budget, found = group_tables(group)
        for name, rows in found.items():
            if rows:
                parts[name].append(pd.DataFrame(rows).assign(budget=budget))
    files = []
    for name, frames in parts.items():
        if frames:
            frame = pd.concat(frames, ignore_index=True)
            files += render.write_table(frame, out, f"attack_{name}", caption(name, frame))
    return files


def attack_tables_target(ctx: Inputs) -> list[Path]:
    """`attack-tables`: Stop Reasoning! Tables 1-2 and the per-run table of every attack budget folder (the attack app's own
    functions), with the paper's values where model family x dataset match."""
    return attack_tables(ctx.paths, ctx.out)
