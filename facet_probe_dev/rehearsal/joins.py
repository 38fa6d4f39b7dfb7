"""What one app hands to the next, checked on a rehearsal's outputs: each check reads the files the apps wrote
and returns what does not hold (an empty list when the join is sound)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from facet_probe.facets import MAIN_FACETS
from facet_probe.paper.targets import TARGETS
from facet_probe.store.table_rules import violations
from facet_probe_dev.rehearsal.run import JUDGES, KEYS, PANEL, Rehearsal

PRIMARY_JUDGE = JUDGES[0]
TRACEBACK = "Traceback (most recent call last)"
TOLERANCE = 1e-9


def every_command_succeeded(r: Rehearsal) -> list[str]:
    return [f"{o.command.name} exited {o.exit_code}: {o.command.shell()} (log: {r.out / 'logs' / o.command.name}.log)"
            for o in r.failed]


def no_traceback_anywhere(r: Rehearsal) -> list[str]:
    """No command printed a traceback, and no log file any app wrote holds one."""
    found = [f"{o.command.name} printed a traceback" for o in r.outcomes if TRACEBACK in o.output]
    logs = r.out / "logs"
    found += [f"{path} holds a traceback" for path in r.out.rglob("*.log")
              if logs not in path.parents and TRACEBACK in path.read_text(errors="replace")]
    return found


def no_secret_written(r: Rehearsal) -> list[str]:
    """None of the API keys the SDKs sent is in any file under the rehearsal's folder."""
    keys = [k.encode() for k in KEYS.values()]
    return [f"{path} holds an API key" for path in r.out.rglob("*")
            if path.is_file() and any(k in path.read_bytes() for k in keys)]


def _table1(r: Rehearsal) -> pd.DataFrame:
    return pd.read_csv(r.out / "paper" / "table1.csv")


def _judged_cells(r: Rehearsal) -> pd.DataFrame:
    """Per (model, facet) of the API panel, the primary judge's set sem-flip: the mean over each dataset's items
    (repeat 0, as its run folder's semantic_flip.csv says), then over the facet's datasets."""
    frames = [pd.read_csv(path) for path in (r.out / "runs").rglob("semantic_flip.csv")]
    sem = pd.concat(frames, ignore_index=True)
    sem = sem[(sem["judge"] == PRIMARY_JUDGE) & (sem["repeat_idx"].fillna(0) == 0) & sem["model"].isin(list(PANEL))]
    per_dataset = sem.groupby(["model", "facet", "dataset"])["sem_flip_set"].mean()
    return per_dataset.groupby(["model", "facet"]).mean().rename("sem_flip").reset_index()


def table1_shows_the_judges_sem_flip(r: Rehearsal) -> list[str]:
    """Every judged cell of Table 1 (the mixed-modality column among them) is the primary judge's sem-flip."""
    table = _table1(r)
    joined = _judged_cells(r).merge(table, on=["model", "facet"], how="left")
    problems = [f"table1 has no row for judged cell {row.model}/{row.facet}" for row in joined.itertuples()
                if pd.isna(row.flip)]
    problems += [f"table1 {row.model}/{row.facet}: flip {row.flip:.4f} from {row.flip_source}, the judge's "
                 f"sem-flip is {row.sem_flip:.4f} (sem_flip_set_{PRIMARY_JUDGE})" for row in joined.dropna(subset=["flip"]).itertuples()
                 if abs(row.flip - row.sem_flip) > TOLERANCE or row.flip_source != f"sem_flip_set_{PRIMARY_JUDGE}"]
    if not (joined["facet"] == "mixed_modality_order").any():
        problems.append("no judged mixed-modality cell: the rehearsal's API panel was not judged on its free text")
    return problems


def combined_report_keeps_the_judge(r: Rehearsal) -> list[str]:
    """The report over the folder of runs gives each (model, facet) the flip and source Table 1 gives it."""
    combined = pd.read_csv(r.out / "report" / "facet_model.csv")
    joined = combined.merge(_table1(r), on=["model", "facet"], how="inner")
    if joined.empty:
        return ["the combined report and table1 share no (model, facet) cell"]
    return [f"report over all runs {row.model}/{row.facet}: {row.any_flip:.4f} ({row.flip_source_x}), table1 says "
            f"{row.flip:.4f} ({row.flip_source_y})" for row in joined.itertuples()
            if abs(row.any_flip - row.flip) > TOLERANCE or row.flip_source_x != row.flip_source_y]


def intervals_agree(r: Rehearsal) -> list[str]:
    """The same cell's interval is the same number in the combined report and in Table 1."""
    combined = pd.read_csv(r.out / "report" / "facet_model.csv")
    joined = combined.merge(_table1(r), on=["model", "facet"], how="inner").dropna(subset=["any_flip_lo", "flip_lo"])
    return [f"{row.model}/{row.facet}: report [{row.any_flip_lo:.4f}, {row.any_flip_hi:.4f}], table1 "
            f"[{row.flip_lo:.4f}, {row.flip_hi:.4f}]" for row in joined.itertuples()
            if abs(row.any_flip_lo - row.flip_lo) > TOLERANCE or abs(row.any_flip_hi - row.flip_hi) > TOLERANCE]


def capability_uses_table1s_mean5(r: Rehearsal) -> list[str]:
    """ODI's capability comparison takes each model's flip as the mean5 Table 1 prints."""
    rates = pd.read_csv(r.out / "odi" / "model_flip_rates.csv")
    table = _table1(r)
    mean5 = table[table["facet"] == "mean5"].set_index("model")["flip"]
    problems = [f"capability flip of {row.model} is {row.flip_rate:.4f}, table1's mean5 is {mean5.get(row.model, np.nan):.4f}"
                for row in rates.itertuples() if not abs(row.flip_rate - mean5.get(row.model, np.nan)) <= TOLERANCE]
    return problems


def every_paper_target_built(r: Rehearsal) -> list[str]:
    """Each paper target wrote its files in one of the paper commands (none skipped, none failed)."""
    said = "\n".join(o.output for o in r.outcomes if o.command.argv[0] == "facet-probe-paper")
    built = set(re.findall(r"^([\w-]+): (?!skipped \(|failed \()\S", said, re.M))  # "<target>: <its files>"
    return [f"paper target {name} was not built (paper logs: {r.out / 'logs'})" for name in TARGETS if name not in built]


def every_table_names_its_inputs(r: Rehearsal) -> list[str]:
    """Each table and figure the paper app wrote is in its sources.json, with the inputs it was built from."""
    paper = r.out / "paper"
    sources = json.loads((paper / "sources.json").read_text())
    written = sorted(p.name for p in paper.iterdir() if p.suffix in (".csv", ".tex", ".png", ".pdf"))
    return [f"{name} does not name its inputs (not in {paper / 'sources.json'})" for name in written
            if not (sources.get(name) or {}).get("inputs")]


def posteriors_say_how_far_to_trust_them(r: Rehearsal) -> list[str]:
    """A smoke fit's tables and figure points say so (R-hat, ESS and 'smoke fit'), never as a result."""
    paper = r.out / "paper"
    points = pd.read_csv(paper / "fig_capability_points.csv")
    problems = [] if {"rhat_max", "ess_bulk_min", "converged"} <= set(points) else \
        ["fig_capability_points.csv lacks rhat_max / ess_bulk_min / converged"]
    if points.get("converged", pd.Series([True])).any():
        problems.append("a smoke fit's capability points are marked converged")
    caption = (paper / "table2_odi.tex").read_text()
    if "smoke fit" not in caption or "NOT A RESULT" not in caption:
        problems.append("table2_odi's caption does not say it comes from a smoke fit, not a result")
    return problems


def oracles_stay_off_the_front(r: Rehearsal) -> list[str]:
    """Policies that read the gold answer are reference marks, never on the cost-accuracy front."""
    points = pd.read_csv(r.out / "paper" / "pareto_points.csv")
    return [f"{row.label} uses the gold answer but is on the front" for row in points.itertuples()
            if row.oracle and row.on_front]


def plugins_reach_every_table(r: Rehearsal) -> list[str]:
    """The user folder's facet and API model are in Table 1 and the combined report, its facet in the examples
    tool, its objective in the attack tables, labelled by its own name."""
    problems = []
    for name, frame in (("table1", _table1(r)), ("report", pd.read_csv(r.out / "report" / "facet_model.csv"))):
        if "rh_caption_order" not in set(frame["facet"]):
            problems.append(f"{name} has no rh_caption_order (plug-in facet) column")
        if "rh_lab_chat" not in set(frame["model"]):
            problems.append(f"{name} has no rh_lab_chat (plug-in API model) row")
    examples = next((o.output for o in r.outcomes if o.command.name == "examples-plugin"), "")
    if "rh_caption_order, permutation" not in examples or "Caption 1" not in examples:
        problems.append("the examples tool did not preview the plug-in facet rh_caption_order")
    attacks = pd.read_csv(r.out / "paper" / "attack_runs.csv")
    if "rh_option_margin" not in set(attacks["attack"].astype(str)):
        problems.append("attack_runs has no row of the plug-in objective rh_option_margin")
    return problems


def every_table_keeps_the_rule(r: Rehearsal) -> list[str]:
    """Every CSV any app wrote keeps the project's rule (`store.table_rules`: an interval holds its point, a count
    is whole, a rate lies in [0, 1]): the first few violations of each table, and how many more."""
    problems = []
    for path in sorted(r.out.rglob("*.csv")):
        name = str(path.relative_to(r.out))
        try:
            found = violations(pd.read_csv(path))
        except pd.errors.EmptyDataError:  # no columns: nothing to hold
            continue
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            problems.append(f"{name} cannot be read as a table: {exc}")
            continue
        problems += [v.line(name) for v in found[:3]]
        problems += [f"{name}: and {len(found) - 3} more"] if len(found) > 3 else []
    return problems


def main_facets_present(r: Rehearsal) -> list[str]:
    """Every model of the main panel has all five main facets in Table 1."""
    table = _table1(r)
    models = [*PANEL, "tiny_vlm", "oracle"]
    return [f"table1 lacks {m}/{f}" for m in models for f in MAIN_FACETS
            if table[(table["model"] == m) & (table["facet"] == f)].empty]


CHECKS: tuple[Callable[[Rehearsal], list[str]], ...] = (
    every_command_succeeded, no_traceback_anywhere, no_secret_written, table1_shows_the_judges_sem_flip,
    combined_report_keeps_the_judge, intervals_agree, capability_uses_table1s_mean5, every_paper_target_built,
    every_table_names_its_inputs, posteriors_say_how_far_to_trust_them, oracles_stay_off_the_front,
    plugins_reach_every_table, main_facets_present, every_table_keeps_the_rule)


def check(r: Rehearsal) -> list[str]:
    """Every check's problems, each prefixed by its check's name; a check that cannot read its inputs says so."""
    problems = []
    for check_fn in CHECKS:
        try:
            found = check_fn(r)
        except (OSError, KeyError, ValueError) as exc:
            found = [f"could not check: {type(exc).__name__}: {exc}"]
        problems += [f"{check_fn.__name__}: {p}" for p in found]
    return problems
