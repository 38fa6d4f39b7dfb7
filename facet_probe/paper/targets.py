"""The paper targets: each reads run folders (through `Inputs`) and writes its tables and figures.

`TARGETS` is the one list of target names (the app's `target=`, the Makefile's targets and docs/paper.md
follow it); `paper` runs every target whose inputs the given run folders hold and says which it skipped."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from facet_probe.core.errors import ConfigError
from facet_probe.facets import MAIN_FACETS
from facet_probe.facets.registry import default_datasets
from facet_probe.metrics.flips import CELL_KEYS
from facet_probe.odi.convergence import Convergence, caption_note
from facet_probe.paper import inputs, odi_tables, pareto, policies, published, render
from facet_probe.paper.inputs import MissingInput
from facet_probe.paper.paired import paired_cells
from facet_probe.report import table1 as t1

log = logging.getLogger("facet_probe.paper")


@dataclass
class Inputs:
    """The run folders of a paper build and what the targets read from them (each read once)."""

    paths: list[Path]
    out: Path
    n_boot: int = 1000
    seed: int = 0
    #: table-mechanism's settings (conf/paper_app.yaml `mechanism`: judges, judge_settings, max_items)
    mechanism: dict = field(default_factory=dict)
    #: which orderings P2, P3 and the K' detector read (conf/paper_app.yaml `mitigation.subsets`)
    subsets: policies.Subsets = policies.Subsets.all

    @functools.cached_property
    def items(self) -> pd.DataFrame:
        return inputs.read_items(self.paths)

    @functools.cached_property
    def policy_items(self) -> pd.DataFrame:
        """Per item of every complete K-ordering cell: each policy's outcome, the K ablation's flips and the
        detector's scores, read as `subsets` says."""
        trials = inputs.read_trials(self.paths)
        grids = policies.cell_grids(trials)
        return pd.concat([policies.item_policies(g, self.subsets) for g in grids.values()], ignore_index=True)

    @functools.cached_property
    def flip_table(self) -> pd.DataFrame:
        """Table 1's long table (its bootstrap is the costly part; Figure 2 draws the same numbers)."""
        return t1.table1(self.items, n_boot=self.n_boot, seed=self.seed)

    @functools.cached_property
    def policy_table(self) -> pd.DataFrame:
        """P1-P6 per cell of K >= 3 orderings (Table 4 and the Pareto front read the same table); cells of fewer
        are left out with a note, none left is MissingInput."""
        items = self.policy_items
        enough = items["k"] >= policies.MIN_POLICY_K
        if not enough.all():
            few = items.loc[~enough].drop_duplicates(CELL_KEYS)
            note = (f"P1-P6 need K >= {policies.MIN_POLICY_K} orderings per cell (P3 is a majority of "
                    f"{policies.MIN_POLICY_K}); {len(few)} cell(s) of K={', '.join(map(str, sorted(set(few['k']))))} "
                    "left out: run the audit with k=6 (the paper's K)")
            if not enough.any():
                raise MissingInput(note)
            log.warning("%s", note)
        return policies.policy_table(items[enough])


def table1(ctx: Inputs) -> list[Path]:
    """Table 1: model x facet flip rate with intervals, mean5, panel mean; the paper's values beside ours."""
    table = ctx.flip_table
    long = t1.same_population(table, ctx.items, published.table1(), default_datasets())
    shown = t1.wide(table, long[["model", "facet", "paper_flip"]]).reset_index()
    compared = long["paper_flip"].notna().any()
    caption = ("K=6 flip rate per model and facet: unweighted mean over each facet's datasets (image set: "
               "position-reference screened items; mixed modality: the primary judge's sem-flip where judged, "
               "else exact match), mean5 over the five main facets, panel mean over models; 95% item-bootstrap "
               "percentile intervals (Wilson where the bootstrap degenerates), models held fixed. "
               + ("The paper's value and our difference are shown only where model, facet and datasets match "
                  "the paper's." if compared else "No row measures the paper's population (its model on its "
                  "datasets), so the paper's values are not shown; table1.csv's paper_population says why."))
    return render.write_table(long, ctx.out, "table1", caption, latex=shown)


def fig_flip_facets(ctx: Inputs) -> list[Path]:
    """Figure 2: flip rate per facet, one bar per model, with intervals and the value on every bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = ctx.flip_table
    table = table[(table["model"] != t1.PANEL) & (table["facet"] != t1.MEAN5)]
    facets = [f for f in MAIN_FACETS if f in set(table["facet"])] + sorted(set(table["facet"]) - set(MAIN_FACETS))
    models = sorted(set(table["model"]))
    width = 0.8 / max(len(models), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(facets) + 0.4 * len(models)), 4.2))
    for j, model in enumerate(models):
        rows = table[table["model"] == model].set_index("facet").reindex(facets)
        x = np.arange(len(facets)) + (j - (len(models) - 1) / 2) * width
        err = np.vstack([rows["flip"] - rows["flip_lo"], rows["flip_hi"] - rows["flip"]]).clip(min=0)
        bars = ax.bar(x, rows["flip"], width, yerr=err, capsize=2, label=model)
        for xi, v, top in zip(x, rows["flip"], rows["flip_hi"], strict=True):
            if not np.isnan(v):  # above the interval, so a zero bar shows its value too
                ax.annotate(f"{v:.2f}", (xi, top), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7, color=bars.patches[0].get_facecolor())
    ax.set_xticks(np.arange(len(facets)), [f.replace("_", " ") for f in facets], rotation=15, ha="right")
    ax.set_ylabel("K=6 flip rate (95% CI)")
    ax.set_ylim(0, 1.15)
    ax.set_title("Flip rate per facet across models")
    ax.legend(fontsize=8, ncol=min(len(models), 4), loc="upper left", bbox_to_anchor=(0, -0.25), frameon=False)
    return render.write_figure(fig, ctx.out, "fig_flip_facets")


def table4_mitigation(ctx: Inputs) -> list[Path]:
    """Table 4: P1-P6 per cell and their means over cells, with cost, beside the paper's values only where model,
    facet and dataset match; and K=2 / K=3 disagreement as a detector of K=6 flips."""
    cells = published.beside_policy_cells(ctx.policy_table)
    means = published.beside_policy_means(policies.policy_means(ctx.policy_table), cells)
    caption = ("Mitigation policies from the stored K=6 trials: " + policies.SUBSETS_READ[ctx.subsets] + "; mean "
               "over cells, unweighted; cost in calls and tokens per item; an abstaining policy's accuracy is over "
               "what it answers (per item, then over the items it answers), coverage and all-items accuracy "
               "(accuracy x coverage: an abstention counted wrong) beside it, as the paper's; P5 and P6 are oracles "
               "(they use the gold answer). The paper's values only where model, facet, dataset and quantity match: "
               "its mean over the cells we share (paper_*) beside ours over the same cells (*_matched); here: "
               + "; ".join(dict.fromkeys(means["paper_population"])) + ".")
    shown = means[[c for c in ("policy", "oracle", "accuracy", "coverage", "all_items_accuracy", "calls_per_item",
                               "tokens_per_item", "n_cells", "n_cells_matched", "accuracy_matched", "paper_accuracy",
                               "paper_difference") if c in means]]
    files = render.write_table(means, ctx.out, "table4_mitigation", caption, latex=shown)
    files += render.write_table(cells, ctx.out, "table4_mitigation_cells",
                                "Mitigation policies per cell; the paper's value and the difference where the paper "
                                "has the same model, facet and dataset.")
    detector = policies.detector_table(ctx.policy_items)
    files += render.write_table(detector, ctx.out, "table4_detector", policies.DETECTOR_READ[ctx.subsets])
    return files


def fig_pareto(ctx: Inputs) -> list[Path]:
    """The cost-accuracy Pareto front of the policies P1-P6 (means over cells, read as `ctx.subsets` says), each
    at its accuracy over all items (an abstention counts as wrong, its coverage beside it); the oracles, which use
    the gold answer, are reference marks off the front. Prompt mitigations are compared in
    `table-prompt-mitigation`, not here."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = policies.policy_means(ctx.policy_table)
    means["on_front"] = pareto.policy_front(means)
    y = pareto.PLACED_AT
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    front = means[means["on_front"]].sort_values("calls_per_item")
    ax.plot(front["calls_per_item"], front[y], "-", color="tab:blue", alpha=0.6, label="Pareto front")
    for r in means.itertuples():
        value = getattr(r, y)
        if r.oracle:  # a bound that reads the gold answer, not a policy one could run
            ax.scatter(r.calls_per_item, value, s=45, marker="D", facecolors="none", edgecolors="dimgray", zorder=3)
            text = f"{r.policy} oracle {value:.3f}"
        else:
            ax.scatter(r.calls_per_item, value, s=45, color="tab:blue" if r.on_front else "tab:gray", zorder=3)
            text = f"{r.policy} {value:.3f}" + (f" (coverage {r.coverage:.2f}; {r.accuracy:.3f} on answered)"
                                                if r.coverage < 1 else "")
        ax.annotate(text, (r.calls_per_item, value), xytext=(-6, 4) if r.oracle else (5, 4), fontsize=8,
                    textcoords="offset points", ha="right" if r.oracle else "left",
                    color="dimgray" if r.oracle else "black")
    ax.scatter([], [], s=45, marker="D", facecolors="none", edgecolors="dimgray",
               label="oracle (uses the gold answer): a bound, off the front")
    ax.set_xlabel("calls per item")
    ax.set_ylabel("accuracy over all items (mean over cells)")
    ax.set_xticks(sorted(set(means["calls_per_item"])))
    ax.margins(x=0.25, y=0.12)
    ax.set_title("Cost-accuracy of the mitigation policies\n(an abstention counts as wrong)", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)  # off the points
    files = render.write_figure(fig, ctx.out, "fig_pareto")
    caption = ("Policy means over cells, each placed at its accuracy over all items (all_items_accuracy: an "
               "abstention counts as wrong; an abstaining policy's accuracy on what it answers and its coverage "
               "beside it; " + policies.SUBSETS_READ[ctx.subsets] + "); "
               "on_front: on the cost-accuracy front of the runnable policies; an oracle (oracle = true: it uses "
               "the gold answer) is a reference bound, never on the front.")
    files += render.write_table(means, ctx.out, "pareto_points", caption)
    return files


def table_k_ablation(ctx: Inputs) -> list[Path]:
    """Flips found from the first K' = 2..K orderings of the same trials, and the share of K=6 flips found."""
    table = policies.k_ablation(ctx.policy_items)
    if table.empty:
        raise MissingInput("the K ablation needs K >= 2 orderings per cell (a flip is seen between two): run the "
                           "audit with k=6 (the paper's K)")
    pooled = table.groupby("k", sort=True)[["flip_rate", "recall_of_full_k"]].mean().reset_index()
    files = render.write_table(table, ctx.out, "table_k_ablation_cells", "K ablation per cell.")
    files += render.write_table(pooled, ctx.out, "table_k_ablation",
                                "Flip rate from the first K' orderings and recall of K=6 flips, mean over cells.")
    return files


DECODER_FILE = "decoder_decomposition.csv"
DECODER_SHOWN = ("n_items", "d_same", "d_cross", "delta", "order_excess_share", "any_flip", "expected_accuracy",
                 "accuracy_swing", "parse_rate")


def table_decoder(ctx: Inputs) -> list[Path]:
    """Appendix D: the decoder-noise decomposition per model x facet x temperature, as `python -m
    facet_probe.decoder.__main__` computed it (read, never recomputed), with the paper's values beside where they match."""
    from facet_probe.decoder.noise import REFERENCE_NAMES

    found = sorted({p for path in ctx.paths for p in ([path / DECODER_FILE] if (path / DECODER_FILE).is_file()
                                                      else path.rglob(DECODER_FILE))})
    if not found:
        raise MissingInput(f"no {DECODER_FILE} under the inputs: run `python -m facet_probe.decoder "
                           "input=<the temperature grid's sweep folder>` first (docs/decoder_noise.md)")
    ours = pd.concat([pd.read_csv(p).assign(source=str(p.parent)) for p in found], ignore_index=True)
    paper = published.read("decoder_decomp_screened_by_facet.csv")
    names = published.model_names().set_index("paper_model")["config"]
    paper = paper.assign(model=paper["model"].map(names)).dropna(subset=["model"])
    wanted = {ref: ours_name for ours_name, ref in REFERENCE_NAMES.items()}
    paper = paper.rename(columns=wanted)[["model", "facet", "temperature", "d_same", "d_cross", "delta"]]
    table = ours.merge(paper.add_prefix("paper_").rename(columns={
        "paper_model": "model", "paper_facet": "facet", "paper_temperature": "temperature"}),
        on=["model", "facet", "temperature"], how="left")
    shown = table[["model", "facet", "temperature", *(c for c in DECODER_SHOWN if c in table)]]
    caption = ("Decoder-noise decomposition (Appendix D): per model x facet x temperature, datasets pooled; d_same: "
               "answer pairs to one ordering that differ; d_cross: pairs to different orderings; delta = d_cross - "
               "d_same (docs/decoder_noise.md defines every column).")
    return render.write_table(table, ctx.out, "table_decoder", caption, latex=shown)


def table_cot_order(ctx: Inputs) -> list[Path]:
    """CoT x order (beyond both papers): per cell the flip and accuracy with and without CoT on the same items,
    and the difference with a paired item-bootstrap interval."""
    items = inputs.read_items_by_setting(ctx.paths, "prompt.cot")
    if not {True, False} <= set(items["setting"].dropna()):
        raise MissingInput("table-cot-order needs runs with prompt.cot=true and prompt.cot=false of the same cells "
                           "(python -m facet_probe -m prompt.cot=true,false ...)")
    table = paired_cells(items, baseline=False, other=True, n_boot=ctx.n_boot, seed=ctx.seed)
    if table.empty:
        raise MissingInput("the CoT and direct runs share no cell (model, facet, dataset) and item")
    caption = ("Chain of thought against a direct answer on the same items: flip and accuracy per cell under each, "
               "and CoT minus direct with a paired 95% item-bootstrap interval.")
    return render.write_table(table, ctx.out, "table_cot_order", caption)


def table_prompt_mitigation(ctx: Inputs) -> list[Path]:
    """Baseline vs each prompt mitigation (`prompt.mitigation=<name>`) on the same items: flip and accuracy
    per cell with paired intervals, text vs visual cells, and the means over each kind of cell."""
    from facet_probe.paper import mitigation as mit

    items = inputs.read_items_by_setting(ctx.paths, "prompt.mitigation")
    items["setting"] = items["setting"].map(lambda v: mit.BASELINE if v is None or str(v).lower() in ("", "none", "null")
                                            else str(v))
    if not ({mit.BASELINE} < set(items["setting"])):
        raise MissingInput("table-prompt-mitigation needs runs without and with prompt.mitigation=<name> of the same "
                           "cells (python -m facet_probe -m prompt.mitigation=null,order_invariant ...)")
    cells = mit.mitigation_cells(items, mit.dataset_modalities(inputs.run_folders(ctx.paths)), ctx.n_boot, ctx.seed)
    if cells.empty:
        raise MissingInput("the mitigation and baseline runs share no cell (model, facet, dataset) and item")
    cells = mit.with_paper_cta(cells, published.read("cta_flip_summary.csv"), published.model_names())
    caption = ("A prompt mitigation (an order-invariance instruction of our own added to the system text, "
               "conf/prompt_mitigation/) against no instruction on the same items: per cell the flip and accuracy "
               "under each and mitigation minus baseline with a paired 95% item-bootstrap interval; each cell text "
               "or visual (its items show an image); the paper's CTA baseline and CTA values (its own, unreleased "
               "instruction) beside ours where model and dataset match.")
    files = render.write_table(cells, ctx.out, "table_prompt_mitigation_cells", caption)
    files += render.write_table(mit.modality_means(cells), ctx.out, "table_prompt_mitigation",
                                "Prompt mitigations: unweighted means over the text, the visual and all cells "
                                "(intervals per cell in table_prompt_mitigation_cells).")
    return files


def table_mechanism(ctx: Inputs) -> list[Path]:
    """Why flipped items flipped: three LLM judges label each (reasoning instability, positional anchoring,
    other; our prompt), the counts per judge and by majority, and Fleiss' kappa (the paper: 225 items)."""
    from facet_probe.paper import mechanism as mech
    from facet_probe.runners.base import RunnerError
    from facet_probe.runners.cost import (
        COST_FILE,
        Budget,
        CostLedger,
        budget_setting,
        load_price_table,
        model_spend,
        with_paid_runner,
    )
    from facet_probe.store.reading import read_items as read_item_records

    settings = ctx.mechanism or {}
    names = list(settings.get("judges") or [])
    if len(names) < 2:
        raise MissingInput(f"table-mechanism needs at least two judges (mechanism.judges={names}); the paper used "
                           "three (conf/judge/)")
    flipped = ctx.items[ctx.items["flip"] == 1]
    if flipped.empty:
        raise MissingInput("no flipped item in the inputs: table-mechanism labels why items flipped")
    folders = inputs.run_folders(ctx.paths)
    questions = {(rec["dataset"], rec["item_id"]): rec.get("question", "")
                 for rec in read_item_records([f / "items.jsonl" for f in folders]).values()}
    cases = mech.flip_cases(flipped, inputs.read_trials(ctx.paths), questions)
    cases = mech.sample_cases(cases, settings.get("max_items"), ctx.seed)
    try:
        judges = mech.load_judges(names, settings.get("judge_settings"))
    except (ConfigError, RunnerError) as exc:  # a judge without its key: the others' targets still build
        raise MissingInput(f"table-mechanism: {exc}") from None
    ctx.out.mkdir(parents=True, exist_ok=True)
    # the judges' calls are paid: priced into out/cost.json and kept within mechanism.budget_usd (every build)
    budget = Budget(budget_setting(settings), spent_before=sum(model_spend(ctx.out).values()),
                    scope=f"by the mechanism judges in {ctx.out}")
    ledger = CostLedger(ctx.out / COST_FILE, budget, load_price_table())
    judges = [with_paid_runner(judge, ledger) for judge in judges]
    try:
        labels = mech.label_cases(cases, judges, ctx.out / mech.CACHE_FILE)
    finally:
        for judge in judges:
            judge.runner.close()
    summary, per_item = mech.mechanism_tables(labels, len(judges))
    stopped = (f" Labelling stopped at mechanism.budget_usd={ledger.budget_usd:g} (cost.json): items some judge "
               "has not labelled are left out of kappa; raise it and rebuild to label the rest."
               if ledger.stopped else "")
    caption = (f"Mechanism of {len(per_item)} flipped items labelled by {len(judges)} LLM judges "
               f"({', '.join(names)}; our prompt, facet_probe/paper/mechanism.py): reasoning instability, positional "
               "anchoring or other, count per judge and by majority (2 of 3); Fleiss' kappa over the items every "
               "judge labelled (the paper: 225 items, kappa 0.28-0.30)." + stopped)
    files = render.write_table(summary, ctx.out, "table_mechanism", caption)
    files += render.write_table(per_item, ctx.out, "table_mechanism_items", "Each flipped item's labels per judge.")
    files += render.write_table(labels, ctx.out, "table_mechanism_labels", "Every label with the judge's reason.")
    return files


def fig_think_budget(ctx: Inputs) -> list[Path]:
    """Flip rate vs thinking budget per cell (a line per model, intervals), one run folder per budget; the
    paper's sweep beside ours where model, cell and budget match."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from facet_probe.paper import think_budget as tb

    items = tb.budget_items(inputs.run_folders(ctx.paths))
    if items["budget"].nunique() < 2:
        raise MissingInput("fig-think-budget needs runs of one cell at two or more thinking budgets "
                           "(python -m facet_probe -m experiment=think_budget_gemini|think_budget_claude|"
                           "think_budget_qwen)")
    table = tb.with_paper(tb.budget_table(items, ctx.n_boot, ctx.seed), published.read("think_budget_sweep.csv"),
                          published.model_names())
    cells = list(table.groupby(["facet", "dataset"], sort=True))
    fig, axes = plt.subplots(1, len(cells), figsize=(4.6 * len(cells), 3.8), squeeze=False)
    for ax, ((facet, dataset), g) in zip(axes[0], cells, strict=True):
        order = sorted(set(g["budget"]), key=lambda b: g.loc[g["budget"] == b, "budget_tokens"].iloc[0])
        for model, m in g.groupby("model", sort=True):
            m = m.set_index("budget").reindex([b for b in order if b in set(m["budget"])])
            x = [order.index(b) for b in m.index]
            err = np.vstack([m["flip"] - m["flip_lo"], m["flip_hi"] - m["flip"]]).clip(min=0)
            ax.errorbar(x, m["flip"], yerr=err, marker="o", capsize=3, label=model)
            if m["paper_flip"].notna().any():
                ax.plot(x, m["paper_flip"], "x--", color="gray", label=f"{model} (paper)")
        regime = g["paper_regime"].dropna()
        ax.set_title(f"{facet.replace('_', ' ')} / {dataset}" + (f" ({regime.iloc[0]})" if len(regime) else ""),
                     fontsize=10)
        ax.set_xticks(range(len(order)), order)
        ax.set_xlabel("thinking budget")
        ax.set_ylabel("K=6 flip rate (95% CI)")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7)
    fig.suptitle("Order sensitivity vs thinking budget", fontsize=11)
    files = render.write_figure(fig, ctx.out, "fig_think_budget")
    caption = ("Flip rate and accuracy per cell and thinking budget (one run folder per budget; the budget as the "
               "runner recorded it sent: Gemini thinking_budget, Claude budget_tokens, Qwen3.5 thinking on/off); "
               "95% item-bootstrap intervals; the paper's sweep (its Gemini models on MedXpertQA and MMLU-Pro) "
               "beside ours where model, cell and budget match.")
    files += render.write_table(table, ctx.out, "fig_think_budget_points", caption)
    return files


def table_calibration(ctx: Inputs) -> list[Path]:
    """Stated vs realised order stability (our protocol, `prompt.calibration=true`): per cell the mean stated
    stability, the realised one and their mismatch with intervals."""
    from facet_probe.paper import calibration_table as cal

    folders = [f for f in inputs.run_folders(ctx.paths) if inputs.run_setting(f, "prompt.calibration") is True]
    if not folders:
        raise MissingInput("table-calibration needs runs with prompt.calibration=true (our stated-stability "
                           "protocol; offline: python -m facet_probe model=always_first_stating prompt.calibration=true)")
    items = cal.item_calibration(inputs.read_trials(folders))
    if items.empty:
        raise MissingInput("the calibration runs' replies state no stability (no 'Stability: p%' line parsed)")
    table = cal.calibration_table(items, ctx.n_boot, ctx.seed)
    caption = ("Our order-stability protocol (the paper's 4-turn confidence protocol is unreleased): after its "
               "answer the model states the probability that the answer survives a reordering; realised = the "
               "share of the item's other orderings with the same answer; mismatch = stated - realised (positive: "
               "overconfident); means over items with 95% item-bootstrap intervals (the paper: mismatch 8.8-62.1 pp "
               "on MedXpertQA).")
    files = render.write_table(table, ctx.out, "table_calibration", caption)
    files += render.write_table(items, ctx.out, "table_calibration_items", "Per item: stated, realised, mismatch.")
    return files


ODI_STATUS = "odi_status.json"


def odi_folders(ctx: Inputs) -> list[Path]:
    """The ODI output folders under the inputs (`python -m facet_probe.odi` writes `odi_status.json`)."""
    found = sorted({p.parent for path in ctx.paths for p in ([path / ODI_STATUS] if (path / ODI_STATUS).is_file()
                                                             else path.rglob(ODI_STATUS))})
    if not found:
        raise MissingInput(f"no ODI output under the inputs (no {ODI_STATUS}): run `python -m facet_probe.odi "
                           "input=<run folders> out=<folder>` and give that folder too (docs/odi.md)")
    return found


def odi_fit(folder: Path, outcome: str) -> Convergence:
    """One ODI outcome's convergence verdict, from its `fit_summary.json` (unknown, so never converged, without)."""
    path = folder / outcome / "fit_summary.json"
    return Convergence.of(json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None)


def odi_outcome_tables(folders: list[Path], name: str) -> tuple[list[pd.DataFrame], dict[str, Convergence]]:
    """Each ODI outcome's `name` table (as the ODI app wrote it) with its outcome, folder and fit's verdict columns,
    and the verdict per fit (keyed by outcome, and folder where several)."""
    parts, fits = [], {}
    for folder in folders:
        for outcome in sorted(p.parent.name for p in folder.glob(f"*/{name}")):
            fit = fits[outcome + (f" ({folder})" if len(folders) > 1 else "")] = odi_fit(folder, outcome)
            parts.append(pd.read_csv(folder / outcome / name).assign(outcome=outcome, odi=str(folder),
                                                                     **fit.columns()))
    return parts, fits


def table2_odi(ctx: Inputs) -> list[Path]:
    """Table 2: the ODI facet decomposition per outcome (sigma_pi, the reference's |E delta| and our E|delta| with
    its interval, ratios to option order) and the theta table, as the ODI app wrote them (never refitted); the
    paper's values only beside their own quantity (`odi_tables.beside_paper`); each row with its fit's R-hat max,
    min bulk ESS and convergence label."""
    folders = odi_folders(ctx)
    parts, fits = odi_outcome_tables(folders, "decomposition.csv")
    if not parts:
        raise MissingInput("the ODI folders hold no outcome's decomposition.csv (is the ODI run complete?)")
    table = odi_tables.beside_paper(pd.concat(parts, ignore_index=True), "odi_facet_decomposition.csv",
                                    odi_tables.TABLE2)
    shown = table[[c for c in ("outcome", "variant", "modal_rule", "facet", "n_items", "sigma_pi_median",
                               "paper_sigma_pi_median", "sigma_pi_draw_median", "sigma_pi_draw_median_lo",
                               "sigma_pi_draw_median_hi",
                               "ratio_sigma_pi", "paper_ratio_sigma_pi", "delta_abs_mean",
                               "paper_delta_abs_mean", "delta_ratio_vs_option", "paper_delta_ratio_vs_option",
                               "mean_abs_delta", "abs_delta_lo", "abs_delta_hi", "ratio_abs_delta", "rhat_max",
                               "ess_bulk_min", "converged")
                   if c in table]]
    note = caption_note(fits)
    caption = (note + "ODI facet decomposition from the ODI app's posterior (not refitted here): per-item order noise "
               "sigma_pi (sigma_pi_median: median over items of the posterior mean, the paper's; "
               "sigma_pi_draw_median: the posterior median of its per-draw median, with its 95% interval), "
               "delta_abs_mean = mean over (dataset, ordering) cells of |posterior mean delta| (the paper's |delta|, paper variant only), mean_abs_delta = posterior "
               "mean of the mean |delta| with its folded 95% band (ours), ratios to option order; a paper_ column "
               "is the paper's Table 2 value of the same quantity, set only for the modal outcome built by the "
               "reference's rule (paper_comparison says why not); rhat_max and ess_bulk_min: the fit's worst "
               "reported parameter. docs/odi.md says what each variant's |delta| can and cannot show.")
    files = render.write_table(table, ctx.out, "table2_odi", caption, latex=shown)
    thetas, _ = odi_outcome_tables(folders, "theta.csv")
    if thetas:
        files += render.write_table(pd.concat(thetas, ignore_index=True), ctx.out, "table2_odi_theta",
                                    note + "Model abilities (theta) per ODI outcome.")
    return files


def table_odi_intervals(ctx: Inputs) -> list[Path]:
    """The appendix's ODI posterior intervals per outcome and facet, as the ODI app wrote them: the per-draw median
    of sigma_pi and (paper variant) sigma_delta, each a posterior median with its 89% HDI; the paper's released
    values only beside their own quantity."""
    parts, fits = odi_outcome_tables(odi_folders(ctx), "posterior_intervals.csv")
    if not parts:
        raise MissingInput("the ODI folders hold no posterior_intervals.csv (written by the ODI app since issue 60: "
                           "fit again with python -m facet_probe.odi)")
    table = odi_tables.beside_paper(pd.concat(parts, ignore_index=True), "odi_posterior_intervals.csv",
                                    odi_tables.INTERVALS)
    points = [f"{side}{point}{end}" for point in ("sigma_pi_draw_median", "sigma_delta_median")
              for side in ("", "paper_") for end in ("", "_lo", "_hi")]
    shown = table[[c for c in ("outcome", "variant", "modal_rule", "facet", "n_items", *points, "rhat_max",
                               "ess_bulk_min", "converged") if c in table]]
    caption = (caption_note(fits) + "ODI posterior intervals from the ODI app's posterior (not refitted here), as "
               "the paper's appendix: per facet the per-draw median of sigma_pi over its items and the facet's "
               "sigma_delta (paper variant only), each its posterior median with the shortest 89% interval "
               "(_lo, _hi; arviz.hdi); a paper_ column is the released value of the same quantity, set only for the "
               "modal outcome built by the reference's rule (paper_comparison says why not).")
    return render.write_table(table, ctx.out, "table_odi_intervals", caption, latex=shown)


def fig_capability(ctx: Inputs) -> list[Path]:
    """Capability (accuracy and theta) against flip rate per model, with the ODI app's Spearman rho and its
    bootstrap interval (`capability_flip.csv`, read, not recomputed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text

    files = []
    folders = odi_folders(ctx)
    for folder in folders:
        name = "fig_capability" + (f"_{folder.name}" if len(folders) > 1 else "")
        if not (folder / "capability_flip.csv").is_file() or not (folder / "model_flip_rates.csv").is_file():
            continue
        rho = pd.read_csv(folder / "capability_flip.csv").set_index("capability")
        models = pd.read_csv(folder / "model_flip_rates.csv")
        theta_file, fit = folder / "correct" / "theta.csv", odi_fit(folder, "correct")
        if theta_file.is_file():  # theta comes from a posterior: its fit's verdict goes with it
            models = models.merge(pd.read_csv(theta_file)[["model", "theta_mean"]], on="model", how="left")
            models = models.assign(**fit.columns())
        panels = [("accuracy", "accuracy", "accuracy")] + (
            [("theta_mean", "theta_correct", "ability theta (correct outcome)")] if "theta_mean" in models else [])
        fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False,
                                 layout="constrained")
        for ax, (column, key, label) in zip(axes[0], panels, strict=True):
            ax.scatter(models[column], models["flip_rate"], s=40, zorder=3)
            ax.margins(0.15)
            texts = [ax.text(getattr(r, column), r.flip_rate, r.model, fontsize=8) for r in models.itertuples()]
            adjust_text(texts, x=models[column].to_numpy(), y=models["flip_rate"].to_numpy(), ax=ax,
                        arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5})  # no label over another
            if key in rho.index:
                r = rho.loc[key]
                ax.set_title(f"Spearman rho {r['rho']:.2f} [{r['rho_lo']:.2f}, {r['rho_hi']:.2f}], "
                             f"{int(r['n_models'])} models", fontsize=10,
                             color=fit.colour if key == "theta_correct" else "black")
            ax.set_xlabel(label)
            ax.set_ylabel("flip rate (Table 1's mean5)")
        left_out = rho["models_left_out"].dropna().iloc[0] if "models_left_out" in rho and \
            rho["models_left_out"].notna().any() else ""
        theta_fit = f"\ntheta: {fit.label}" if "theta_mean" in models else ""  # the posterior's verdict, in red
        theta_fit += f"\nleft out (no mean5 flip): {left_out}" if left_out else ""
        fig.suptitle("Capability vs order sensitivity" + theta_fit, fontsize=11,  # unless a result
                     color=fit.colour if theta_fit else "black")
        files += render.write_figure(fig, ctx.out, name)
        note = caption_note({"theta (correct outcome)": fit}) if "theta_mean" in models else ""
        files += render.write_table(models, ctx.out, f"{name}_points", note + "Per model: flip rate, accuracy and "
                                    "theta (rhat_max, ess_bulk_min, converged, fit: theta's posterior fit).")
    if not files:
        raise MissingInput("the ODI folders hold no capability_flip.csv (the ODI app writes it with 3+ models)")
    return files


def published_only(target: Callable[[Inputs], list[Path]]) -> Callable[[Inputs], list[Path]]:
    """Declare a target that reads the package's published data alone, so it needs no `input=`."""
    target.needs_input = False
    return target


def needs_input(target: Callable[[Inputs], list[Path]]) -> bool:
    """Whether a target reads run folders (`input=`); False only for one declared `published_only`."""
    return getattr(target, "needs_input", True)


@published_only
def verify(ctx: Inputs) -> list[Path]:
    """Our aggregation reproduces the paper's model and panel means from the paper's per-cell values."""
    checks = published.verify()
    files = render.write_table(checks, ctx.out, "verify", "Published values recomputed by our aggregation.")
    if not checks["ok"].all():
        bad = checks[~checks["ok"]]
        raise VerifyFailed(f"{len(bad)} of {len(checks)} published values are not reproduced, e.g. "
                           f"{bad.iloc[0]['check']}: published {bad.iloc[0]['published']:.6f}, ours "
                           f"{bad.iloc[0]['ours']:.6f} (see {files[0]})")
    log.info("verify: %d published values reproduced within %.0e", len(checks), published.TOLERANCE)
    return files


def attack_tables(ctx: Inputs) -> list[Path]:
    """Stop Reasoning! Tables 1-2 and the per-run table of every attack budget folder (the attack app's own
    functions), with the paper's values where model family x dataset match."""
    from facet_probe.paper.attack_tables import attack_tables as build

    return build(ctx.paths, ctx.out)


class VerifyFailed(Exception):
    """Our aggregation does not reproduce a published value (a bug, not a user error)."""


#: target name -> what builds it. `paper` is every one of them.
TARGETS: dict[str, Callable[[Inputs], list[Path]]] = {
    "table1": table1,
    "fig-flip-facets": fig_flip_facets,
    "table4-mitigation": table4_mitigation,
    "fig-pareto": fig_pareto,
    "table-k-ablation": table_k_ablation,
    "table-decoder": table_decoder,
    "table2-odi": table2_odi,
    "table-odi-intervals": table_odi_intervals,
    "fig-capability": fig_capability,
    "table-cot-order": table_cot_order,
    "table-prompt-mitigation": table_prompt_mitigation,
    "table-mechanism": table_mechanism,
    "fig-think-budget": fig_think_budget,
    "table-calibration": table_calibration,
    "verify": verify,
    "attack-tables": attack_tables,
}
