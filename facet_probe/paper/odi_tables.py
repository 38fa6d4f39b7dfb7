"""The paper's ODI values beside ours (Table 2, the appendix's posterior intervals), only where both are one quantity.

The paper's fit is the modal outcome built by the reference's rule (`odi.modal_rule=drop_ties`), and a paper value
stands only beside our column of its own definition, where the fit has one (|E delta| and sigma_delta exist in the
paper variant alone)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from facet_probe.odi.outcome import ModalRule
from facet_probe.paper import published

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
