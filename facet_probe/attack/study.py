"""The ImageNet study table (the attack paper's Appendix C): Table 1 on one population per class count.

    python -m facet_probe.attack.study <out_root>/attack/<model>

reads every budget folder of the `imagenet4`, `imagenet8` and `imagenet16` datasets under the model's
folder (`conf/experiment/attack_imagenet_study.yaml` runs them) and writes `imagenet_study.md` / `.csv`
there: per task and budget, the accuracy of each column on that task's population
(`population.POPULATION_RULE`), so CoT and no CoT are compared on the same images.
"""

from __future__ import annotations

import sys
from pathlib import Path

from facet_probe.attack.grid import Column, ordered, pct, read_grid
from facet_probe.attack.population import POPULATION_RULE, population, table1_cells
from facet_probe.core.untrusted import markdown_cell, markdown_text
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.csv_tables import write_rows

TASKS = ("imagenet4", "imagenet8", "imagenet16")


def study_rows(model_dir: Path) -> tuple[list[dict], list[Column]]:
    """One row per (task, budget folder) with each column's accuracy on the task's population, and the columns
    (every column any budget folder has, in the tables' order)."""
    out: list[dict] = []
    seen: dict[tuple[str, str], Column] = {}
    for task in TASKS:
        for group in sorted((model_dir / task).glob("*/")):
            grid = read_grid(group)
            if not grid.rows:
                continue
            pop = population(grid.rows)
            cells = table1_cells(grid.rows, pop, [c.key for c in grid.columns])
            seen |= {c.key: c for c in grid.columns}
            out.append({"task": task, "budget": grid.budget, "population": len(pop.items),
                        **{f"{m}_{a}": cell["accuracy"] for (m, a), cell in cells.items()}})
    return out, ordered(list(seen.values()))


def write_study(model_dir: Path) -> Path | None:
    """imagenet_study.md and .csv in the model's folder (its name and the attacks' titles shown as written); None
    when no budget folder holds a run."""
    rows, columns = study_rows(model_dir)
    if not rows:
        return None
    names = [f"{c.mode}_{c.attack}" for c in columns]
    lines = [f"# ImageNet study: CoT vs no CoT on the 4/8/16-class tasks ({markdown_text(model_dir.name)})\n",
             f"{POPULATION_RULE} Each task has its own population.\n",
             "| task | budget | population | " + " | ".join(markdown_cell(c.heading) for c in columns) + " |",
             "|---" * (len(columns) + 3) + "|"]
    for r in rows:
        lines.append(f"| {r['task']} | {markdown_cell(r['budget'])} | {r['population']} | " + " | ".join(
            pct(r.get(name)) for name in names) + " |")
    atomic_write_text(model_dir / "imagenet_study.md", "\n".join(lines) + "\n")
    write_rows(model_dir / "imagenet_study.csv", rows, ["task", "budget", "population", *names])
    return model_dir / "imagenet_study.md"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python -m facet_probe.attack.study <out_root>/attack/<model> (a folder)", file=sys.stderr)
        return 2
    path = write_study(Path(args[0]))
    if path is None:
        print(f"error: {args[0]} holds no finished run of {', '.join(TASKS)}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
