"""The paper's ODI values beside ours (Table 2, the appendix's posterior intervals), only where both are one quantity.

The paper's fit is the modal outcome built by the reference's rule (`odi.modal_rule=drop_ties`), and a paper value
stands only beside our column of its own definition, where the fit has one (|E delta| and sigma_delta exist in the
paper variant alone)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from facet_probe.odi.convergence import Convergence, caption_note
from facet_probe.odi.outcome import ModalRule
from facet_probe.paper import published, render
from facet_probe.paper.build_inputs import Inputs
from facet_probe.paper.inputs import MissingInput

#: Table 2, `odi_facet_decomposition.csv`: the release's column -> our `decomposition.csv` column of its definition.
TABLE2 = {"sigma_pi_median": "sigma_pi_median", "sigma_ratio_vs_option": "ratio_sigma_pi",
          "delta_abs_mean": "delta_abs_mean", "delta_ratio_vs_option": "delta_ratio_vs_option"}
#: The appendix, `odi_posterior_intervals.csv`: the release's column -> our `posterior_intervals.csv` column.
INTERVALS = {"sigma_pi_median": "sigma_pi_draw_median", "sigma_pi_hdi89_low": "sigma_pi_draw_median_lo",
             "sigma_pi_hdi89_high": "sigma_pi_draw_median_hi", "sigma_delta_median": "sigma_delta_median",
             "sigma_delta_hdi89_low": "sigma_delta_median_lo", "sigma_delta_hdi89_high": "sigma_delta_median_hi"}
PAPER_OUTCOME = "modal"
PAPER_RULE = ModalRule.drop_ties


def beside_paper(ours: pd.DataFrame, release: str, columns: dict[str, str]) -> pd.DataFrame:
    """`ours` with `paper_<our column>` after each of `columns`' values: the release's value where the row's fit is
    the paper's kind (outcome, modal rule) and ours holds that quantity, else empty; `paper_comparison` says why."""
    paper = published.read(release).set_index("facet")[list(columns)].rename(columns=columns)
    out = ours.copy()
    for column in columns.values():
        if column not in out:
            out[column] = np.nan  # a quantity this fit has not (e.g. sigma_delta in the positional variant)
    rule = out["modal_rule"] if "modal_rule" in out else pd.Series(None, index=out.index, dtype=object)
    kind = (out["outcome"] == PAPER_OUTCOME) & (rule == str(PAPER_RULE))
    for column in columns.values():
        out[f"paper_{column}"] = out["facet"].map(paper[column]).where(kind & out[column].notna())
    out["paper_comparison"] = [comparison(row, kind_, paper.index, list(columns.values()))
                               for (_, row), kind_ in zip(out.iterrows(), kind, strict=True)]
    return out


def comparison(row: pd.Series, paper_kind: bool, paper_facets: pd.Index, columns: list[str]) -> str:
    """Why a row has the paper's values beside it, or which it lacks and why."""
    if row["outcome"] != PAPER_OUTCOME:
        return f"none: the paper's values are of the {PAPER_OUTCOME} outcome"
    if not paper_kind:
        return f"none: this modal outcome was not built by the reference's rule (odi.modal_rule={PAPER_RULE})"
    if row["facet"] not in paper_facets:
        return "none: the paper has no such facet"
    lacking = [c for c in columns if pd.isna(row[c])]
    return "the paper's quantity beside each of ours" + (
        f"; none beside {', '.join(lacking)}, which this fit has not (|E delta| and sigma_delta are the paper "
        "variant's, a ratio needs option_order)" if lacking else "")


ODI_STATUS = "odi_status.json"


def odi_folders(ctx: Inputs) -> list[Path]:
    """The ODI output folders under the inputs (`python -m facet_probe.odi` writes `odi_status.json`)."""
    from facet_probe.store.run_folder import folders_under

    found = sorted({f for path in ctx.paths for f in folders_under(path, lambda f: (f / ODI_STATUS).is_file())})
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
    paper's values only beside their own quantity (`beside_paper`); each row with its fit's R-hat max,
    min bulk ESS and convergence label."""
    folders = odi_folders(ctx)
    parts, fits = odi_outcome_tables(folders, "decomposition.csv")
    if not parts:
        raise MissingInput("the ODI folders hold no outcome's decomposition.csv (is the ODI run complete?)")
    table = beside_paper(pd.concat(parts, ignore_index=True), "odi_facet_decomposition.csv",
                                    TABLE2)
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
    table = beside_paper(pd.concat(parts, ignore_index=True), "odi_posterior_intervals.csv",
                                    INTERVALS)
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
