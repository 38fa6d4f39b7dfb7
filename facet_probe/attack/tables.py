"""Run summaries and the paper's tables, from `results.jsonl` rows.

Per run folder: `summary.json` / `summary.csv` (accuracy before and after the attack, attacked samples,
success rate, rationale changes, rationale skips, L-inf, steps), `samples.csv` (one flat row per
sample), `loss_curves.csv` (sample, step, loss and its components) and `loss_curves.png`.

Per budget folder (``<model>/<dataset>/eps16-a1-s200-u10/``, the parent of the ``<attack>-<cot|direct>``
runs): `table.md` and `table.csv` in the paper's layout (Wang et al. 2024, Tables 1-3), with a column per
run present (`attack.grid`: per mode, no attack first, then each attack under its objective's title, in its
declared order; a plug-in under its own name):

- accuracy per column. Accuracy is over all samples of the run: an attacked sample counts with its
  adversarial answer, a sample that was not attacked (wrong, or no rationale, on the clean image) with
  its clean answer. "No attack" is the `attack=none` run of that mode, else the clean pass of any run of
  that mode (the clean pass does not depend on the attack);
- attack success (successful / attacked) by each run's rule (`success_rule`), and by the reference's (a wrong
  answer: `reference_success`);
- the share of successful attacks whose rationale changed (with CoT);
- per attack with CoT, the share of adversarial outputs that skip the rationale (answer in the first
  sentence; what the stop-reasoning attack aims at), beside the same share of the clean outputs.

Each run is scored on its own items; `table.md` says so and points at `table1.md`, which scores every
column on one population.

The budget folder also gets the paper's Table 1 on one population, Table 2 and Figure 7 (`attack.report`).

Rebuild tables of existing folders: ``python -m facet_probe.attack.tables <run or budget folder>... [--judge
<name>]`` (the judge labels the rationale changes; cached in the budget folder).
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from facet_probe.attack.grid import MODES, NO_ATTACK, Column, Grid, pct, read_grid
from facet_probe.attack.loop import WRONG_ANSWER_RULE
from facet_probe.attack.population import reference_success
from facet_probe.core.errors import ConfigError
from facet_probe.core.untrusted import markdown_cell, markdown_text
from facet_probe.store.atomic import atomic_path, atomic_write_text
from facet_probe.store.csv_tables import write_rows

log = logging.getLogger("facet_probe.attack")



def _share(flags: list[bool]) -> float | None:
    return sum(map(bool, flags)) / len(flags) if flags else None


def summarize(rows: list[dict], meta: dict[str, Any]) -> dict[str, Any]:
    """Counts and shares of one run (see the module docstring for the definitions)."""
    attacked = [r for r in rows if r.get("attacked")]
    successes = [r for r in attacked if r.get("success")]
    cot = meta.get("mode") == "cot"
    after = [r["adv_correct"] if r.get("attacked") else r["clean_correct"] for r in rows]
    return {
        **meta,
        "n": len(rows),
        "clean_correct": sum(r["clean_correct"] for r in rows),
        "clean_accuracy": _share([r["clean_correct"] for r in rows]),
        "selected": sum(bool(r["selected"]) for r in rows),
        "not_selected": dict(Counter(r["selection_reason"] for r in rows if not r["selected"])),
        "attacked": len(attacked),
        "errors": sum(1 for r in rows if r.get("error")),
        "successes": len(successes),
        "success_rate": _share([r["success"] for r in attacked]),
        "reference_successes": sum(map(reference_success, attacked)),
        "reference_success_rate": _share([reference_success(r) for r in attacked]),
        "adv_accuracy": _share(after) if meta.get("attack") != NO_ATTACK else _share([r["clean_correct"] for r in rows]),
        "rationale_changed_share": _share([r["rationale_changed"] for r in successes]) if cot else None,
        "skip_rationale_share": _share([r["adv_answer_first"] for r in attacked]) if cot else None,
        "clean_skip_rationale_share": _share([r["clean_answer_first"] for r in rows]) if cot else None,
        "mean_linf_255": (sum(r["linf_255"] for r in attacked) / len(attacked)) if attacked else None,
        "max_linf_255": max((r["linf_255"] for r in attacked), default=None),
        "mean_steps": (sum(r["steps_run"] for r in attacked) / len(attacked)) if attacked else None,
        "stopped_early": sum(bool(r.get("stopped_early")) for r in attacked),
    }


SAMPLE_COLUMNS = ("sample_id", "item_id", "attack", "mode", "gold", "target", "selected", "selection_reason",
                  "attacked", "clean_answer", "clean_correct", "clean_answer_first", "adv_answer", "adv_correct",
                  "adv_answer_first", "success", "reference_success", "rationale_changed", "hit_target", "linf_255",
                  "steps_run", "updates", "refreshes", "stopped_early", "error", "clean_output", "adv_output")


def summary_line(summary: dict[str, Any]) -> str:
    """The run's closing line: accuracy before and after, and the successes by the rule `success` follows (said in
    words) beside the count by the reference's rule (a wrong answer) when the two rules differ."""
    line = f"clean accuracy {_percent(summary['clean_accuracy'])}, after attack {_percent(summary['adv_accuracy'])}"
    if summary.get("attack") == NO_ATTACK:
        return line
    attacked = summary["attacked"]
    rule = summary.get("success_rule") or "the objective's rule"
    line += f"; attacks succeeded: {summary['successes']}/{attacked} by {rule}"
    if rule != WRONG_ANSWER_RULE:
        line += f", {summary['reference_successes']}/{attacked} by {WRONG_ANSWER_RULE}"
    return line


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def write_run_tables(run_dir: Path, rows: list[dict], meta: dict[str, Any]) -> dict[str, Any]:
    """summary.json/csv, samples.csv, loss_curves.csv/png of one run folder; returns the summary."""
    summary = summarize(rows, meta)
    atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    flat = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    flat["not_selected"] = json.dumps(summary["not_selected"], sort_keys=True)
    write_rows(run_dir / "summary.csv", [flat])
    write_rows(run_dir / "samples.csv", [{k: r.get(k) for k in SAMPLE_COLUMNS} for r in rows], SAMPLE_COLUMNS)
    curves = [{"sample_id": r["sample_id"], "step": i + 1, **{k: vals[i] for k, vals in r["curve"].items()}}
              for r in rows if r.get("curve") for i in range(len(r["curve"].get("loss", [])))]
    if curves:
        keys = ["sample_id", "step", *dict.fromkeys(k for c in curves for k in c if k not in ("sample_id", "step"))]
        write_rows(run_dir / "loss_curves.csv", curves, keys)
        _plot_curves(run_dir / "loss_curves.png", rows, meta)
    return summary


#: Up to this many samples the loss curves are a line each, named in a legend; more are summarised (median, bands).
CURVE_LINES_MAX = 8


def loss_curves_figure(rows: list[dict], meta: dict[str, Any]):
    """The attack's loss (and each of its parts) per PGD step, a panel each: up to `CURVE_LINES_MAX` samples a line
    each, named in a legend; more (a line each is a tangle no reader can follow), the median over the samples still
    running at each step with bands for their middle half and their range, in a legend saying how many samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    with_curves = [r for r in rows if r.get("curve", {}).get("loss")]
    parts = list(dict.fromkeys(k for r in with_curves for k in r["curve"]))
    fig, axes = plt.subplots(1, len(parts), figsize=(4 * len(parts), 3.2), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        curves = pd.concat([pd.Series(r["curve"].get(part, []), dtype=float, name=str(r["sample_id"]))
                            for r in with_curves], axis=1)  # a column per sample, NaN after its last step
        steps = curves.index + 1
        if len(with_curves) <= CURVE_LINES_MAX:
            for name, ys in curves.items():
                ax.plot(steps, ys, lw=0.9, label=name)
        else:
            ax.fill_between(steps, curves.min(axis=1), curves.max(axis=1), color="#4477aa", alpha=0.12, lw=0,
                            label="range")
            ax.fill_between(steps, curves.quantile(0.25, axis=1), curves.quantile(0.75, axis=1), color="#4477aa",
                            alpha=0.3, lw=0, label="middle half (25-75%)")
            ax.plot(steps, curves.median(axis=1), color="#224466", lw=1.4, label=f"median of {len(with_curves)} samples")
        ax.set_title(part)
        ax.set_xlabel("PGD step")
    if parts:  # beside the last panel, off the curves
        axes[0, -1].legend(*axes[0, 0].get_legend_handles_labels(), fontsize=7, loc="upper left",
                           bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
                           title="sample" if len(with_curves) <= CURVE_LINES_MAX else None, title_fontsize=7)
    fig.suptitle(f"{meta.get('model')} / {meta.get('dataset')}: {meta.get('attack')} ({meta.get('mode')})")
    fig.tight_layout()
    return fig


def _plot_curves(path: Path, rows: list[dict], meta: dict[str, Any]) -> None:
    import matplotlib.pyplot as plt

    fig = loss_curves_figure(rows, meta)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=100)
    finally:
        plt.close(fig)


# --- the paper's tables over the runs of one budget folder -------------------------------------------------

#: what table.md says of table1.md (and why the two differ)
POINTER = ("Each run is scored on its own items (n). `table1.md` beside this table scores every column on "
           "one population (the items every run holds whose clean reply with CoT is correct and gives a rationale), "
           "as the paper's Table 1 does; the two differ where the runs hold other items or attack other ones.")


def _cell(grid: Grid, column: Column) -> dict | None:
    """A column's run summary; the no-attack column without an `attack=none` run is the clean pass of any run
    of its mode (the clean pass does not depend on the attack)."""
    if column.key in grid.summaries:
        return grid.summaries[column.key]
    if not column.attacks:
        for (mode, attack), s in grid.summaries.items():
            if mode == column.mode:
                return {**s, "attack": NO_ATTACK, "adv_accuracy": s["clean_accuracy"], "attacked": 0,
                        "successes": 0, "success_rate": None, "success_rule": None, "reference_successes": 0,
                        "reference_success_rate": None, "rationale_changed_share": None, "skip_rationale_share": None,
                        "from_clean_pass_of": attack}
    return None


def _row(label: str, cells: list[str]) -> str:
    """A table row: its label (a run's names) shown as written (`core.untrusted`), then our formatted cells."""
    return f"| {markdown_cell(label)} | " + " | ".join(cells) + " |"


def _head(titles: list[str]) -> list[str]:
    return ["| | " + " | ".join(map(markdown_cell, titles)) + " |", "|---" * (len(titles) + 1) + "|"]


def group_table(group_dir: Path) -> tuple[str, list[dict]]:
    """The markdown tables and the long rows for one budget folder (columns: `attack.grid`)."""
    grid = read_grid(group_dir)
    if not grid.summaries:
        return "", []
    any_run = next(iter(grid.summaries.values()))
    model, dataset = any_run["model"], any_run["dataset"]
    budget = markdown_text(f"eps {any_run['eps_255']}/255, alpha {any_run['alpha_255']}/255, {any_run['steps']} "
                           f"steps, pseudo-target refresh every {any_run['update_every']} steps.")
    title = f"# Adversarial CoT attacks: {markdown_text(f'{model} on {dataset}')}\n\n{budget}\n\n{POINTER}\n"
    cells = {c.key: _cell(grid, c) for c in grid.columns}
    long = [{"model": model, "dataset": dataset, "mode": c.mode, "attack": c.attack, "title": c.title, "n": s["n"],
             "accuracy": s["adv_accuracy"], "clean_accuracy": s["clean_accuracy"], "attacked": s["attacked"],
             "successes": s.get("successes"), "success_rate": s["success_rate"], "success_rule": s.get("success_rule"),
             "reference_successes": s.get("reference_successes"),
             "reference_success_rate": s.get("reference_success_rate"),
             "rationale_changed_share": s.get("rationale_changed_share"),
             "skip_rationale_share": s.get("skip_rationale_share"),
             "clean_skip_rationale_share": s.get("clean_skip_rationale_share"),
             "source": s.get("from_clean_pass_of", c.attack)}
            for c in grid.columns if (s := cells[c.key]) is not None]
    label = f"{model} / {dataset}"
    attacks, cot = grid.attack_columns(), grid.attack_columns("cot")

    def acc(c: Column) -> str:
        s = cells[c.key]
        return "-" if s is None else f"{pct(s['adv_accuracy'])} (n={s['n']})"

    def success(c: Column, rate: str = "success_rate", count: str = "successes") -> str:
        s = cells[c.key]
        return "-" if s is None or count not in s else f"{pct(s[rate])} ({s[count]}/{s['attacked']})"

    def reference(c: Column) -> str:
        return success(c, "reference_success_rate", "reference_successes")

    lines = [title, "## Accuracy (%)\n", *_head([c.heading for c in grid.columns]),
             _row(label, [acc(c) for c in grid.columns]), ""]
    if attacks:
        rules = sorted({str(s.get("success_rule")) for c in attacks if (s := cells[c.key])} - {"None"})
        lines += ["## Attack success (% of attacked samples)\n", *_head([c.heading for c in attacks]),
                  _row(label, [success(c) for c in attacks]),
                  _row(f"by {WRONG_ANSWER_RULE}", [reference(c) for c in attacks]), "",
                  "Success follows each run's rule (" + markdown_text("; ".join(rules) or "the objective's")
                  + "); the second row "
                  "counts the reference's, a wrong answer for every attack (`attack/loop=reference` makes it the "
                  "rule).", ""]
    if cot:
        shown = [(c, s) for c in cot if (s := cells[c.key]) is not None]  # each attack column has its run's summary
        lines += ["## Successful attacks whose rationale changed (%, with CoT)\n", *_head([c.title for c in cot]),
                  _row(label, [f"{pct(s['rationale_changed_share'])} (of {s['successes']})" for _, s in shown]), "",
                  "## Outputs that skip the rationale (answer in the first sentence, %, with CoT)\n",
                  "| | clean outputs | adversarial outputs |", "|---|---|---|"]
        lines += [_row(c.heading, [f"{pct(s['clean_skip_rationale_share'])} (of {s['n']})",
                                   f"{pct(s['skip_rationale_share'])} (of {s['attacked']})"])
                  for c, s in shown]
        lines.append("")
    notes = [f"- {MODES[r['mode']]}: no attack taken from the clean pass of the {markdown_text(r['source'])} run"
             for r in long if r["attack"] == NO_ATTACK and r["source"] != NO_ATTACK]
    if notes:
        lines += ["Notes:\n", *notes, ""]
    lines += ["Accuracy counts an attacked sample with its adversarial answer and every other sample with its "
              "clean answer; attacks run only on samples answered correctly (with a rationale, with CoT).", ""]
    return "\n".join(lines), long


def write_group_table(group_dir: Path, judge=None) -> Path | None:
    """table.md + table.csv (per run) in a budget folder, and the paper's Table 1 (one population),
    Table 2 and Figure 7 (`attack.report`; `judge` judges the rationale changes); None when it holds no
    finished run."""
    from facet_probe.attack.report import write_report

    text, long = group_table(group_dir)
    if not text:
        return None
    atomic_write_text(group_dir / "table.md", text)
    write_rows(group_dir / "table.csv", long, list(long[0]) if long else [])
    write_report(group_dir, judge)
    return group_dir / "table.md"


def rebuild(folder: Path, judge=None) -> list[Path]:
    """Re-write the tables of a run folder (and its budget folder) or of every run in a budget folder."""
    written = []
    runs = [folder] if (folder / "results.jsonl").exists() else sorted(p.parent for p in folder.glob("*/results.jsonl"))
    for run in runs:
        rows = [json.loads(ln) for ln in (run / "results.jsonl").read_text().splitlines() if ln.strip()]
        meta_path = run / "summary.json"
        if not meta_path.exists():
            log.warning("%s has no summary.json (the run has not finished once); skipped", run)
            continue
        meta = {k: v for k, v in json.loads(meta_path.read_text()).items() if k in META_KEYS}
        write_run_tables(run, rows, meta)
        written.append(run)
    for group in sorted({r.parent for r in runs} | ({folder} if not runs else set())):
        table = write_group_table(group, judge)
        if table:
            written += [table, *(group / n for n in ("table1.md", "table2.md", "figure7.png") if (group / n).exists())]
    return written


META_KEYS = ("model", "dataset", "attack", "mode", "eps", "alpha", "eps_255", "alpha_255", "steps",
             "update_every", "seed", "targeted", "quantize", "early_stop", "sequence", "attack_title", "attack_order",
             "attack_variant", "loop", "success_rule")


def load_judge(name: str, overrides: list[str]):
    """The `LLMJudge` of `conf/judge/<name>.yaml` (with `judge.*` overrides), its key checked."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("facet_probe.conf", version_base=None):
            cfg = compose("judge_app", overrides=[f"judge={name}", "input=.", *overrides])
    except Exception as exc:  # an unknown judge or key: Hydra's own message
        raise ConfigError(f"--judge {name}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    judge = instantiate(cfg.judge)
    judge.runner.check_ready()  # a missing key fails before any work
    return judge


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m facet_probe.attack.tables",
                                     description="Rebuild the attack tables (per run, Table 1 on one population, "
                                                 "Table 2, Figure 7) of run or budget folders.")
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--judge", help="a judge config (conf/judge/<name>.yaml) to judge rationale changes")
    parser.add_argument("--judge-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a Hydra override of the judge config, e.g. judge.runner.base_url=...")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        judge = load_judge(args.judge, args.judge_override) if args.judge else None
        for folder in args.folders:
            if not folder.is_dir():
                raise ConfigError(f"{folder}: not a folder (give an attack run or budget folder)")
            for path in rebuild(folder, judge):
                print(path)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
