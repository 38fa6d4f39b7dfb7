"""The ImageNet study table (the attack paper's Appendix C): Table 1 on one population per class count.

    python -m facet_probe.attack.study <out_root>/attack/<model>

reads every budget folder of the `imagenet4`, `imagenet8` and `imagenet16` datasets under the model's
folder (`conf/experiment/attack_imagenet_study.yaml` runs them) and writes `imagenet_study.md` / `.csv`
there: per task and budget, the accuracy of each column on that task's population
(`population.POPULATION_RULE`), so CoT and no CoT are compared on the same images.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from facet_probe.atomic import atomic_path, atomic_write_text
from facet_probe.attack.population import COLUMNS, POPULATION_RULE, population, table1_cells
from facet_probe.attack.report import TITLES, read_grid

TASKS = ("imagenet4", "imagenet8", "imagenet16")


def study_rows(model_dir: Path) -> list[dict]:
    """One row per (task, budget folder) with each column's accuracy on the task's population."""
    out = []
    for task in TASKS:
        for group in sorted((model_dir / task).glob("*/")):
            runs, _ = read_grid(group)
            if not runs:
                continue
            pop = population(runs)
            cells = table1_cells(runs, pop)
            out.append({"task": task, "budget": group.name, "population": len(pop.items),
                        **{f"{m}_{a}": cells[(m, a)]["accuracy"] if (m, a) in cells else None for m, a in COLUMNS}})
    return out


def write_study(model_dir: Path) -> Path | None:
    rows = study_rows(model_dir)
    if not rows:
        return None
    head = [TITLES[c] for c in COLUMNS]
    lines = [f"# ImageNet study: CoT vs no CoT on the 4/8/16-class tasks ({model_dir.name})\n",
             f"{POPULATION_RULE} Each task has its own population.\n",
             "| task | budget | population | " + " | ".join(head) + " |", "|---" * (len(head) + 3) + "|"]
    for r in rows:
        cells = ["-" if r[f"{m}_{a}"] is None else f"{100 * r[f'{m}_{a}']:.1f}" for m, a in COLUMNS]
        lines.append(f"| {r['task']} | {r['budget']} | {r['population']} | " + " | ".join(cells) + " |")
    atomic_write_text(model_dir / "imagenet_study.md", "\n".join(lines) + "\n")
    with atomic_path(model_dir / "imagenet_study.csv") as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
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
