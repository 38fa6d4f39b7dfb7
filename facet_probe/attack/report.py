"""The paper's Table 1 (one population), Table 2 and Figure 7 of one budget folder, with the paper's values.

Written beside the per-run `table.md` (tables.py) by `python -m facet_probe.attack.tables <folder>`:

- `table1.md` / `table1.csv`: accuracy and attack success of every column (a run present, `attack.grid`) on one
  population (`population.POPULATION_RULE`; the caption counts the items left out and names those some run
  lacks, and points back at the per-run `table.md`), with the paper's row of our victim x dataset
  (`paper_values`: each table names the victim and whether it is the paper's model or a relative);
- `table2.md` / `table2.csv`: among the successful attacks with CoT (on the population), the share whose
  rationale changed: mechanically (after normalising whitespace and case) and by an LLM judge (when one
  ran: `--judge <name>`; cached in `rationale_judgments.jsonl`); an attack with no success has no share
  (empty, not 0) and a note says so;
- `rationale_labels.csv`, `figure7.csv`, `figure7.png`: each attacked sample's rationale change labelled
  key / trivial / no change per outcome (success / failure); the figure reads the labels file, whose
  `label` column a person may fill in (kept on rebuild); without a judge the labels are the heuristic's,
  and the figure says so.
"""

from __future__ import annotations

import logging
from pathlib import Path

from facet_probe.attack import paper_values
from facet_probe.attack.grid import Grid, pct, read_grid
from facet_probe.attack.loop import WRONG_ANSWER_RULE
from facet_probe.attack.population import POPULATION_RULE, Population, item_key, population, table1_cells
from facet_probe.attack.rationale_change import (
    LABELS_FILE,
    Change,
    changed,
    figure7_counts,
    label_rows,
    read_labels,
    write_labels,
)
from facet_probe.attack.rationale_judge import cached_judgments, judge_rows
from facet_probe.core.untrusted import markdown_cell, markdown_text
from facet_probe.store.atomic import atomic_path, atomic_write_text
from facet_probe.store.csv_tables import write_rows

log = logging.getLogger("facet_probe.attack")

#: what table1.md says of table.md
POINTER = "Per-run accuracies, each run scored on its own items: `table.md` beside this table."
#: how many items missing from some run the caption names
NAMED_MISSING = 10


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def missing_note(pop: Population, grid: Grid) -> str:
    """The items some run lacks, each with the runs that lack it (the first `NAMED_MISSING`)."""
    if not pop.missing:
        return ""
    named = [markdown_text(f"{item} (not in {', '.join(grid.column(k).heading for k in keys)})")
             for item, keys in list(pop.missing.items())[:NAMED_MISSING]]
    more = len(pop.missing) - NAMED_MISSING
    return " Not held by every run: " + "; ".join(named) + (f"; and {more} more" if more > 0 else "") + "."


def table1(grid: Grid) -> tuple[str, list[dict]]:
    """Every column of the grid on one population (`population.POPULATION_RULE`), the paper's row beside ours; the
    runs' names (model, dataset, attack titles, items) shown as written (`core.untrusted`)."""
    runs, settings = grid.rows, grid.settings
    pop = population(runs)
    keys = [c.key for c in grid.columns]
    cells = table1_cells(runs, pop, keys)
    model, dataset = settings.get("model", "?"), settings.get("dataset", "?")
    victim = paper_values.victim_of(model, settings.get("model_config"))
    paper, how = paper_values.matching("table1.csv", victim, dataset)
    head = [markdown_cell(c.heading) for c in grid.columns]
    shown_model, shown_dataset = markdown_text(model), markdown_text(dataset)
    acc = ["-" if k not in cells else f"{pct(cells[k]['accuracy'])} ({cells[k]['correct']}/{cells[k]['n']})"
           for k in keys]
    def success(rate: str, count: str) -> list[str]:
        return ["-" if c.key not in cells or not c.attacks else
                f"{pct(cells[c.key][rate])} ({cells[c.key][count]}/{cells[c.key]['attacked']})" for c in grid.columns]
    dropped = markdown_text(", ".join(f"{k}: {v}" for k, v in sorted(pop.dropped.items())) or "none")
    lines = [f"# Table 1 (one population): {shown_model} on {shown_dataset}\n", f"{POPULATION_RULE} Here: {len(pop.items)} of "
             f"{pop.candidates} items held by every run (left out: {dropped}).{missing_note(pop, grid)}\n",
             f"{POINTER}\n", "## Accuracy (%)\n",
             "| | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|",
             f"| {markdown_cell(f'ours: {model} ({victim.describe()}) / {dataset}')} | " + " | ".join(acc) + " |"]
    for r in paper:
        lines.append(f"| paper: {r['paper_model']} / {r['dataset']} | " + " | ".join(
            r.get(f"{m}_{a}") or "-" for m, a in keys) + " |")
    lines += ["", "## Attack success (% of the population's attacked items)\n", "| | " + " | ".join(head) + " |",
              "|---" * (len(head) + 1) + "|",
              f"| {markdown_cell(f'ours: {model} / {dataset}')} | " + " | ".join(success("success_rate", "successes"))
              + " |",
              f"| by {WRONG_ANSWER_RULE} | " + " | ".join(success("reference_success_rate", "reference_successes"))
              + " |", "", "The first row counts each run's own success rule (its `summary.json` `success_rule`).", ""]
    lines.append(markdown_text(paper_values.caption(victim, how)))
    lines.append(f"Paper values: {paper[0]['source']}." if paper else
                 f"Paper values: none for {victim.paper_model or 'model family ' + (victim.paper_family or '?')} "
                 f"x dataset {shown_dataset} (facet_probe/assets/stop_reasoning_paper/table1.csv).")
    who = {"victim_relation": victim.relation, "paper_model": victim.paper_model}
    rows = [{"model": model, "dataset": dataset, "mode": c.mode, "attack": c.attack, "title": c.title,
             "population": len(pop.items), **who, **cells.get(c.key, {})} for c in grid.columns]
    rows += [{"model": f"paper:{r['paper_model']}", "dataset": r["dataset"], "mode": m, "attack": a,
              "accuracy": float(r[f"{m}_{a}"]) / 100} for r in paper for m, a in keys if r.get(f"{m}_{a}")]
    return "\n".join(lines) + "\n", rows


def attacked_cot(grid: Grid, items: set[str]) -> dict[str, list[dict]]:
    """Attack -> the population's attacked rows of each w/ CoT attack run."""
    return {c.attack: [r for r in grid.rows[c.key] if r.get("attacked") and item_key(r) in items]
            for c in grid.attack_columns("cot") if c.key in grid.rows}


def table2(attacked: dict[str, list[dict]], judged: dict[tuple[str, str], dict], settings: dict
           ) -> tuple[str, list[dict]]:
    """Of the population's successful attacks with CoT, the share whose rationale changed (mechanically, by the
    judge); an attack without a success has no share (empty, not 0) and says so. Names shown as written."""
    model, dataset = settings.get("model", "?"), settings.get("dataset", "?")
    victim = paper_values.victim_of(model, settings.get("model_config"))
    lines = ["# Table 2: successful attacks with CoT whose rationale changed, "
             + markdown_text(f"{model} ({victim.describe()}) on {dataset}") + "\n",
             "Mechanical: the rationale differs after normalising whitespace and case. LLM judge: the judge says "
             "its meaning changed (of the successes it judged). Population as in Table 1.\n",
             "| attack | attacked | successes | changed (mechanical) | changed (LLM judge) |", "|---|---|---|---|---|"]
    rows, notes = [], []
    for attack, attacked_rows in attacked.items():
        wins = [r for r in attacked_rows if r.get("success")]
        mech = sum(map(changed, wins))
        verdicts = [judged[(attack, r["sample_id"])] for r in wins if (attack, r["sample_id"]) in judged]
        by_judge = sum(bool(v["changed"]) for v in verdicts)
        judges = sorted({v["judge"] for v in verdicts})
        if wins:
            note = "" if verdicts else "no LLM judge ran"
        else:
            note = f"no successful attack ({len(attacked_rows)} attacked): no rationale change to count"
            notes.append(f"- {markdown_text(attack)}: {note}")
        lines.append(f"| {markdown_cell(attack)} | {len(attacked_rows)} | {len(wins)} | {pct(_share(mech, len(wins)))} "
                     f"({mech}/{len(wins)}) | "
                     + (f"{pct(by_judge / len(verdicts))} ({by_judge}/{len(verdicts)}, {markdown_cell(', '.join(judges))})"
                        if verdicts else "- (no judge ran)") + " |")
        rows.append({"model": model, "dataset": dataset, "attack": attack, "victim_relation": victim.relation,
                     "paper_model": victim.paper_model, "attacked": len(attacked_rows), "successes": len(wins),
                     "changed_mechanical": mech, "changed_mechanical_share": _share(mech, len(wins)),
                     "judged": len(verdicts), "changed_judge": by_judge,
                     "changed_judge_share": _share(by_judge, len(verdicts)), "judges": ";".join(judges),
                     "note": note})
    paper, how = paper_values.matching("table2.csv", victim, dataset)
    for r in paper:
        lines.append(f"| paper: {r['paper_model']} / {r['dataset']}: {r['attack']} | | | {r['rationale_changed']} | |")
    if notes:
        lines += ["", "Shares are empty, not 0, where no attack succeeded:", *notes]
    lines += ["", markdown_text(paper_values.caption(victim, how)), "Paper values: " + (paper[0]["source"] if paper else
                                     "the paper's Table 2 is not in facet_probe/assets/stop_reasoning_paper/ "
                                     "(see its README)") + "."]
    return "\n".join(lines) + "\n", rows


def figure7(labels: list[dict], settings: dict) -> tuple[dict, str]:
    counts = figure7_counts(labels)
    sources = sorted({r["used_from"] for r in labels})
    note = ("labels from the heuristic labeller (changed words vs the answer's content words)"
            if sources == ["heuristic"] else f"labels from: {', '.join(sources)} (hand > LLM judge > heuristic)")
    return counts, note


def figure7_md(counts: dict, note: str, settings: dict) -> str:
    """Figure 7's counts as a table, with the paper's bars where the model family matches (names as written)."""
    model, dataset = settings.get("model", "?"), settings.get("dataset", "?")
    lines = [f"# Figure 7: rationale changes per attack outcome, {markdown_text(f'{model} on {dataset}')}\n",
             f"{markdown_text(note[:1].upper() + note[1:])}; correct them in {LABELS_FILE} (column `label`) and "
             "rebuild. Population as in Table 1.\n",
             "| | key change | trivial change | no change |", "|---|---|---|---|"]
    lines += [f"| {markdown_cell(f'ours: {attack}, {outcome}')} | {c['key']} | {c['trivial']} | {c['no_change']} |"
              for (attack, outcome), c in sorted(counts.items())]
    victim = paper_values.victim_of(model, settings.get("model_config"))
    paper, how = paper_values.matching("figure7.csv", victim)
    lines += [f"| paper: {r['paper_model']}, {r['outcome']} | {r['key']} | {r['trivial']} | {r['no_change']} |"
              for r in paper]
    lines += ["", markdown_text(paper_values.caption(victim, how))]
    if paper:
        lines += [f"Paper values: {paper[0]['source']}."]
    return "\n".join(lines) + "\n"


def _plot_figure7(path: Path, counts: dict, note: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(counts)
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(groups)), 3.2))
    width = 0.27
    for k, change in enumerate(Change):
        xs = [i + (k - 1) * width for i in range(len(groups))]
        ys = [counts[g][change.value] for g in groups]
        bars = ax.bar(xs, ys, width, label=change.value.replace("_", " "))
        ax.bar_label(bars, fontsize=7)
    ax.set_xticks(range(len(groups)), [f"{outcome}\n{attack}" for attack, outcome in groups], fontsize=8)
    ax.set_ylabel("samples")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.text(0.01, 0.01, note, fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)


def write_report(group_dir: Path, judge=None) -> list[Path]:
    """Table 1, Table 2 and Figure 7 of a budget folder (nothing when it holds no run); `judge`: an LLMJudge
    to judge the rationale changes not judged yet (else cached judgments only)."""
    grid = read_grid(group_dir)
    if not grid.rows:
        return []
    settings = grid.settings
    text1, rows1 = table1(grid)
    atomic_write_text(group_dir / "table1.md", text1)
    write_rows(group_dir / "table1.csv", rows1)
    written = [group_dir / "table1.md"]
    attacked = attacked_cot(grid, set(population(grid.rows).items))
    flat = [{**r, "attack": a} for a, rows in attacked.items() for r in rows]
    if not flat:
        return written
    judged = judge_rows(flat, judge, group_dir) if judge is not None else cached_judgments(flat, group_dir)
    text2, rows2 = table2(attacked, judged, settings)
    atomic_write_text(group_dir / "table2.md", text2)
    write_rows(group_dir / "table2.csv", rows2)
    labels = label_rows(attacked, {k: (v["judge"], v["change"]) for k, v in judged.items()},
                        read_labels(group_dir / LABELS_FILE))
    write_labels(group_dir / LABELS_FILE, labels)
    counts, note = figure7(labels, settings)
    write_rows(group_dir / "figure7.csv", [{"attack": a, "outcome": o, **c, "labels": note}
                                           for (a, o), c in sorted(counts.items())])
    atomic_write_text(group_dir / "figure7.md", figure7_md(counts, note, settings))
    _plot_figure7(group_dir / "figure7.png", counts, note,
                  f"Rationale changes: {settings.get('model', '?')} on {settings.get('dataset', '?')}")
    return [*written, group_dir / "table2.md", group_dir / LABELS_FILE, group_dir / "figure7.md",
            group_dir / "figure7.png"]
