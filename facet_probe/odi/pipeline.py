"""One ODI run: load trials (and items), fit each outcome, write tables, figures and diagnostics.

The I/O edge of the ODI package; `__main__` only turns the Hydra config into `OdiRun`.
Run folder layout: odi_status.json, data_summary.json, odi_config.json, capability_flip.csv, and per
outcome `<outcome>/` with item_params.csv, theta.csv, decomposition.csv, posterior_intervals.csv,
signed_delta.csv, diagnostics.csv, fit_summary.json, figures/*.png and (on request) posterior.nc.

Nothing half-written is left by a kill: an outcome's folder is written in a hidden temp folder and
swapped in whole once its fit and files are complete, the run's files are written atomically after the
fits, and `odi_status.json` says `complete` only when all of it is (`running` while a fit is under way).

Nothing of the user's is lost: `out` is a new or empty folder or an earlier ODI run's (it holds
odi_status.json), else the run is refused before any input is read (`store.out_folder.check`); a file of
the user's in an outcome folder is carried into the new one (`store.atomic.atomic_dir`, which drops only
`OUTCOME_FILES`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from facet_probe.judge.run import JudgeTables, judge_tables_of
from facet_probe.judge.tables import combined_source, correct_source, with_gold_match
from facet_probe.odi import capability, figures, tables
from facet_probe.odi.data import OdiData, build_odi_data, load_item_facts
from facet_probe.odi.fit import CompiledModels, Convergence, FitSettings, diagnostics, fit, summary
from facet_probe.odi.kernel import LoglikKernel
from facet_probe.odi.model import (
    DELTA_READS,
    Priors,
    ScaleParam,
    Variant,
    build_model,
    check_variant,
    parse_variant,
    uses_conditional_centring,
)
from facet_probe.odi.outcome import ModalRule, modal_rule_for
from facet_probe.scoring.run_trials import CALL_RECORDS, read_runs
from facet_probe.store.atomic import atomic_dir, atomic_path, atomic_write_text
from facet_probe.store.csv_tables import write_csv
from facet_probe.store.out_folder import check
from facet_probe.store.run_folder import RunFolder, read_items, run_inputs

log = logging.getLogger(__name__)

STATUS = "odi_status.json"
#: What `fit_outcome` writes into an outcome folder (posterior.nc only with save_idata): a refit drops one of
#: these that it does not write again; any other file there is the user's and is kept.
OUTCOME_FILES = ("item_params.csv", "theta.csv", "decomposition.csv", "posterior_intervals.csv", "signed_delta.csv",
                 "diagnostics.csv", "fit_summary.json", "figures/theta.png", "figures/decomposition.png",
                 "posterior.nc")


@dataclass(frozen=True)
class OdiRun:
    """Everything one run needs (from `conf/odi_app.yaml`)."""

    inputs: list[str]
    outcomes: tuple[str, ...] = ("modal", "correct")
    variant: Variant = Variant.positional  # the paper's model: Variant.paper (docs/odi.md)
    fit: FitSettings = field(default_factory=FitSettings)
    priors: Priors = field(default_factory=Priors)
    out: Path | None = None
    dry_run: bool = False
    save_idata: bool = False
    facets: list[str] | None = None
    items: str | None = None
    float32: bool = True
    kernel: LoglikKernel = LoglikKernel.auto  # dense likelihood: auto | blocked one-pass Op | graph (kernel.py)
    scales: ScaleParam = ScaleParam.conditional  # order noise and scales: conditional | noncentred | centred (same posterior)
    bootstrap: int = 2000
    modal_rule: ModalRule | None = None  # drop_ties (the reference's) | break_ties; None follows the variant

    @property
    def modal(self) -> ModalRule:
        """The modal outcome's rule: `modal_rule`, or the variant's (outcome.MODAL_RULE_OF_VARIANT)."""
        return modal_rule_for(self.variant, self.modal_rule)


def parse_outcome(outcome: str) -> tuple[str, ...]:
    """`both` -> (modal, correct); a single outcome stays itself."""
    if outcome == "both":
        return ("modal", "correct")
    if outcome not in ("modal", "correct"):
        raise ValueError(f"outcome must be modal, correct or both; got {outcome!r}")
    return (outcome,)


def default_out(inputs: list[str], variant: str) -> Path:
    """Where a run writes unless told: <folder>/odi/<variant> for one input folder (a run folder, or a folder of
    them as the user gave it), else outputs/odi/<variant>-<timestamp>."""
    if len(inputs) == 1 and Path(inputs[0]).is_dir():
        return Path(inputs[0]) / "odi" / variant
    return Path("outputs") / "odi" / f"{variant}-{time.strftime('%Y-%m-%d_%H-%M-%S')}"


def input_folders(run: OdiRun) -> list[Path]:
    """The folder of each input (a trials file's own folder), where its items and judgments are."""
    return [p if p.is_dir() else p.parent for p in run_inputs(run.inputs)]


def read_inputs(run: OdiRun) -> tuple[pd.DataFrame, JudgeTables | None]:
    """The trials, each run folder through its manifest (no mixed settings), with `correct` the judge's gold
    match where a judge gave one (as in the report), and the judges' tables of the input folders."""
    frame = read_runs(run.inputs, drop=CALL_RECORDS).trials  # ODI reads scores, not what the calls cost
    judged = judge_tables_of(input_folders(run), frame)
    return with_gold_match(frame, judged.judgments if judged is not None else None), judged


def prepare(run: OdiRun) -> tuple[pd.DataFrame, dict[str, OdiData]]:
    """Load and validate: the trial frame and one OdiData per outcome (raises on unusable input)."""
    frame, _ = read_inputs(run)
    return frame, build_datasets(frame, run)


def build_datasets(frame: pd.DataFrame, run: OdiRun) -> dict[str, OdiData]:
    """One validated OdiData per outcome of the run (raises on unusable input)."""
    facts = load_item_facts(run.inputs, run.items)
    positional = run.variant == "positional"
    if positional and not facts:
        log.warning("no items.jsonl found: only option_order can be located (from gold letters)")
    datasets = {}
    for outcome in run.outcomes:
        data = build_odi_data(frame, outcome, facts, positional=positional, facets=run.facets, modal_rule=run.modal)
        check_variant(data, run.variant)
        datasets[outcome] = data
    return datasets


def fit_outcome(data: OdiData, run: OdiRun, folder: Path, compiled: CompiledModels | None = None):
    """Fit one outcome and write its tables, figures and diagnostics; returns the InferenceData. `compiled`: the
    run's earlier compiles, which an outcome whose model differs only in its data reuses."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "figures").mkdir(exist_ok=True)
    model = build_model(data, run.variant, run.priors, float32=run.float32, kernel=run.kernel, scales=run.scales)
    log.info("ODI %s / %s: %d trials, %d items, %d models; sampling with %s", run.variant, data.outcome,
             data.n_trials, len(data.items), len(data.models), run.fit.sampler)
    idata, wall = fit(model, run.fit, compiled)
    diagnosed = diagnostics(idata, wall)
    fit_summary = {"variant": str(run.variant), "abs_delta": DELTA_READS[parse_variant(run.variant)],
                   "scales": str(run.scales), "conditional_centring": uses_conditional_centring(data, run.scales),
                   "outcome_data": data.outcome_notes, **summary(idata, wall, run.fit, diagnosed)}
    verdict = Convergence.of(fit_summary)  # every table of this posterior carries it (R-hat, ESS, label)
    items = tables.item_table(idata, data)
    theta = tables.theta_table(idata, data)
    decomposition = with_fit_columns(tables.decomposition_table(idata, data, run.variant), data, run)
    intervals = with_fit_columns(tables.posterior_interval_table(idata, data, run.variant), data, run)
    write_csv(items.assign(**verdict.columns()), folder / "item_params.csv")
    write_csv(theta.assign(**verdict.columns()), folder / "theta.csv")
    write_csv(decomposition.assign(**verdict.columns()), folder / "decomposition.csv")
    write_csv(intervals.assign(**verdict.columns()), folder / "posterior_intervals.csv")
    write_csv(tables.signed_delta_table(idata, data, run.variant).assign(**verdict.columns()),
              folder / "signed_delta.csv")
    write_csv(diagnosed, folder / "diagnostics.csv")
    atomic_write_text(folder / "fit_summary.json", json.dumps(fit_summary, indent=2))
    title = f"{run.variant} variant, outcome {data.outcome}"
    figures.theta_figure(theta, folder / "figures" / "theta.png", title, verdict)
    figures.decomposition_figure(decomposition, items, folder / "figures" / "decomposition.png", title, verdict)
    if not verdict.converged:
        log.warning("%s: %s; its tables and figures say so", data.outcome, verdict.label)
    if run.save_idata:
        with atomic_path(folder / "posterior.nc") as tmp:
            idata.to_netcdf(str(tmp))
    log.info("%s: R-hat max %.3f, min bulk ESS %.0f, %d divergences, %.0f s", data.outcome,
             fit_summary["rhat_max"], fit_summary["ess_bulk_min"], fit_summary["divergences"], wall)
    return idata


def with_fit_columns(table: pd.DataFrame, data: OdiData, run: OdiRun) -> pd.DataFrame:
    """`variant` and `modal_rule` (the modal outcome's, empty for `correct`) first: which |delta| a table holds and
    how its outcome was built, so that a paper value is set only beside its own quantity (paper/odi_tables.py)."""
    out = table.copy()
    out.insert(0, "modal_rule", data.outcome_notes.get("modal_rule"))
    out.insert(0, "variant", str(run.variant))
    return out


def outcome_line(data: OdiData) -> str:
    """What the outcome kept and dropped, for the log: the modal rule's ties and unparsed trials, or unscored."""
    n = data.outcome_notes
    if data.outcome == "correct":
        return f"correct: {n['trials_kept']:,} of {n['trials_read']:,} trials kept, {n['dropped_unscored']:,} unscored dropped"
    kept = f"modal ({n['modal_rule']}): {n['trials_kept']:,} of {n['trials_read']:,} trials kept"
    ties = (f"{n['dropped_tied_groups']:,} tied (model, item) groups dropped with their {n['dropped_tied_trials']:,} "
            f"trials, {n['dropped_unparsed_trials']:,} unparsed trials dropped"
            if n["modal_rule"] == ModalRule.drop_ties else
            f"{n['groups_with_tie']:,} tied groups broken by the hash rule, {n['unparsed_scored_0']:,} unparsed "
            "trials scored 0")
    return f"{kept}; {ties}; {n['dropped_no_parsed_answer']:,} trials of groups with no parsed answer dropped"


def flip_rates(run: OdiRun, frame: pd.DataFrame, judged: JudgeTables | None) -> pd.DataFrame:
    """model_flip_rates.csv: per model Table 1's mean5 flip (`capability.model_flip_rates`: the screened items,
    the judges' sem-flip where judged) with its `flip_source`, and accuracy."""
    items = read_items(RunFolder(f).items_file for f in input_folders(run))
    return capability.model_flip_rates(frame, items, judged.semantic_flip if judged is not None else None)


def capability_table(flips: pd.DataFrame, fits: dict, datasets: dict[str, OdiData], run: OdiRun) -> pd.DataFrame:
    """Spearman rho of flip rate vs accuracy, and vs theta (correct outcome, posterior draws) when fitted, over
    the models with both (`models_left_out` names fitted models without a mean5 flip); `flip_source` says where
    the models' flip rates come from (exact match, a judge's sem-flip, or both)."""
    source = combined_source(flips["flip_source"])
    flips = flips.set_index("model")
    rows = []
    if "accuracy" in flips:
        stats = capability.spearman_bootstrap(flips["accuracy"].to_numpy(), flips["flip_rate"].to_numpy(),
                                              n_boot=run.bootstrap, seed=run.fit.seed)
        rows.append({"capability": "accuracy", **stats, "flip_source": source})
    if "correct" in fits:
        fitted = list(datasets["correct"].models)
        both = [i for i, m in enumerate(fitted) if m in flips.index]  # a model with no main facet has no mean5
        left_out = [m for m in fitted if m not in flips.index]
        if left_out:
            log.warning("theta vs flip leaves out %s: no mean5 flip (no main-facet cell), as in Table 1",
                        ", ".join(left_out))
        if len(both) >= 3:
            theta_draws = tables.draws(fits["correct"], "theta")[:, both]
            flip = flips.loc[[fitted[i] for i in both], "flip_rate"].to_numpy()
            stats = capability.spearman_bootstrap(theta_draws.mean(0), flip, theta_draws,
                                                  n_boot=run.bootstrap, seed=run.fit.seed)
            rows.append({"capability": "theta_correct", **stats, "flip_source": source,
                         "models_left_out": ", ".join(left_out)})
    return pd.DataFrame(rows)


def run_odi(run: OdiRun) -> Path | None:
    """Validate, then (unless dry_run) fit every outcome and write the run folder; returns it."""
    out = None if run.dry_run else check(run.out or default_out(run.inputs, run.variant), "ODI", [STATUS])
    frame, judged = read_inputs(run)
    datasets = build_datasets(frame, run)
    summaries = {o: d.summary() for o, d in datasets.items()}
    if out is None:  # a dry run
        print(json.dumps({"variant": str(run.variant), "abs_delta": DELTA_READS[parse_variant(run.variant)],
                          "inputs": run.inputs, "outcomes": summaries}, indent=2))
        return None
    out.mkdir(parents=True, exist_ok=True)
    started = _now()
    outcome_data = {o: d.outcome_notes for o, d in datasets.items()}  # what each outcome kept and dropped
    write_status(out, "running", started_at=started, outcomes=list(datasets), variant=str(run.variant),
                 outcome_data=outcome_data)
    fits, compiled = {}, CompiledModels()
    for data in datasets.values():
        log.info("%s", outcome_line(data))
    for outcome, data in datasets.items():
        with atomic_dir(out / outcome, OUTCOME_FILES) as staging:  # swapped in once the fit and its files are done
            fits[outcome] = fit_outcome(data, run, staging, compiled)
    atomic_write_text(out / "data_summary.json", json.dumps(summaries, indent=2))
    atomic_write_text(out / "odi_config.json", json.dumps(dataclasses.asdict(run), indent=2, default=str))
    flips = flip_rates(run, frame, judged)
    write_csv(flips, out / "model_flip_rates.csv")
    if len(flips) >= 3:
        write_csv(capability_table(flips, fits, datasets, run), out / "capability_flip.csv")
    else:
        (out / "capability_flip.csv").unlink(missing_ok=True)  # never one left from an earlier run
        log.warning("capability vs flip needs >= 3 models; got %d, skipped", len(flips))
    sources = {"flip_source": combined_source(flips["flip_source"]),  # what was read: the judge's or exact match
               "correct_source": correct_source(frame, judged.judgments if judged is not None else None)}
    write_status(out, "complete", started_at=started, finished_at=_now(), outcomes=list(datasets),
                 variant=str(run.variant), abs_delta=DELTA_READS[parse_variant(run.variant)],
                 outcome_data=outcome_data, **sources)
    log.info("ODI read flips from %s and correctness from %s", sources["flip_source"], sources["correct_source"])
    log.info("ODI outputs in %s (%s variant: |delta| shows %s; it cannot show %s)", out, run.variant,
             DELTA_READS[parse_variant(run.variant)]["shows"], DELTA_READS[parse_variant(run.variant)]["cannot_show"])
    return out


def write_status(out: Path, state: str, **facts) -> None:
    """`odi_status.json`: `running` while fits are under way, `complete` once every output is written."""
    atomic_write_text(out / STATUS, json.dumps({"state": state, **facts}, indent=2))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
