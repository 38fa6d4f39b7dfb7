"""report.md: the run's headline tables and figures in a page a person reads first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from facet_probe.core.untrusted import markdown_cell, markdown_text
from facet_probe.metrics.flips import PaperTables

SUMMARY_COLUMNS = ("model", "facet", "dataset", "n_items", "flip_rate", "disagreement", "osi", "accuracy",
                   "parse_rate", "n_trials_missing")


def md_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured markdown table (written here to avoid a dependency on `tabulate`); every cell and heading
    shown as written (`core.untrusted`: a model or dataset name is the user's text)."""
    def fmt(v) -> str:
        if isinstance(v, float):
            return "" if pd.isna(v) else f"{v:.{digits}f}"
        return markdown_cell(v)

    head = "| " + " | ".join(map(markdown_cell, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def with_ci(frame: pd.DataFrame, metric: str) -> pd.Series:
    """'0.412 [0.350, 0.470]' strings for a metric with _lo/_hi columns (the value alone where its CI is empty)."""
    def fmt(r) -> str:
        if pd.isna(r[metric]):
            return ""
        lo, hi = r.get(f"{metric}_lo"), r.get(f"{metric}_hi")
        return f"{r[metric]:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if pd.notna(lo) and pd.notna(hi) else "")
    return frame.apply(fmt, axis=1)


@dataclass(frozen=True)
class ReportPage:
    """What report.md shows, top to bottom: `provenance` (the runs, `report.provenance.render_provenance`), `notes`
    (a shard, missing trials: what a reader must know before the numbers), the cells (`summary`) and Table 1's
    tables (`paper`); where there are any, Cohen's kappa between judges (`agreement`), per judge and cell its
    unreadable replies and the answers it was sent cut (`replies`, `judge.tables.judge_replies`), the gold-anchor
    cross-check (`anchor`), the same-order control (`control`); flipped items per cell (`examples`), the figures."""

    title: str
    summary: pd.DataFrame
    paper: PaperTables
    figures: Sequence[Path] = ()
    control: pd.DataFrame | None = None
    notes: Sequence[str] = ()
    agreement: pd.DataFrame | None = None
    anchor: pd.DataFrame | None = None
    provenance: str | None = None
    examples: Sequence[str] = ()
    replies: pd.DataFrame | None = None


def render_report(page: ReportPage, out: Path) -> str:
    """The page's markdown; `out`: the folder it is written to (its figures' links are relative to it)."""
    parts = [f"# {markdown_text(page.title)}", ""]
    if page.provenance:
        parts += [page.provenance, ""]
    parts += [EXPLORER_LINK, ""]
    for note in page.notes:
        parts += [note, ""]
    parts += [*cells_section(page.summary), *screened_section(page.summary), *per_model_section(page.paper),
              *agreement_section(page.agreement), *replies_section(page.replies), *anchor_section(page.anchor),
              *control_section(page.control)]
    if page.examples:
        parts += ["", *page.examples]
    parts += ["", "## Figures", ""]
    parts += [f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in page.figures]
    return "\n".join(parts) + "\n"


EXPLORER_LINK = ("Every item's orderings side by side, as each model saw them: [explorer.html](explorer.html) "
                 "(a static page; open it from disk).")


def cells_section(summary: pd.DataFrame) -> list[str]:
    """What the metrics mean, and one row per cell (its flip rate with its interval)."""
    table = summary[[c for c in SUMMARY_COLUMNS if c in summary]].copy()
    table["flip_rate"] = with_ci(summary, "flip_rate")
    return ["Flip rate: share of items whose answer changes across the K orderings (95% item-bootstrap "
            "CI; Wilson where every item agrees). Disagreement: share of ordering pairs that disagree. OSI: answer "
            "entropy normalised by log of the number of possible answers. Answers are compared by meaning (the "
            "option's content), not by letter.", "", "## Cells", "", md_table(table)]


def screened_section(summary: pd.DataFrame) -> list[str]:
    """The unscreened numbers of the image-set cells the screen touched; nothing where it touched none."""
    if "screened_out" not in summary or not summary["screened_out"].gt(0).any():
        return []
    screened = summary[summary["screened_out"] > 0]
    return ["", "Image-set cells are screened (items that refer to image positions are dropped); unscreened numbers:",
            "", md_table(screened[["model", "facet", "dataset", "n_items", "n_items_unscreened",
                                   "flip_rate_unscreened", "accuracy_unscreened"]])]


def per_model_section(paper: PaperTables) -> list[str]:
    """Per model and facet, the mean over datasets with its intervals and, where judged, its flip's source."""
    source = ["flip_source"] if "flip_source" in paper.facet_model else []
    parts = ["", "## Per model and facet (mean over datasets)", ""]
    if source and paper.facet_model["flip_source"].ne("exact_match").any():
        parts += ["A judged cell's flip rate here and in facet_model.csv, model_main.csv and panel.csv is the "
                  "primary LLM judge's semantic flip, (B + C) / n over its set verdicts (as the paper's "
                  "Table 1); `flip_source` says which (sources joined by `+` where a row has several).", ""]
    per_model = paper.facet_model.copy()
    for metric in ("any_flip", "accuracy"):
        if f"{metric}_lo" in per_model:
            per_model[metric] = with_ci(paper.facet_model, metric)
    return parts + ["95% CIs: items resampled within each dataset, the dataset means averaged (a judged item's flip "
                    "is its sem-flip), seeded as the paper's Table 1, which prints the same intervals.", "",
                    md_table(per_model[["model", "facet", "n_datasets", "any_flip", "accuracy", *source]]
                             .rename(columns={"any_flip": "flip_rate"}))]


def agreement_section(agreement: pd.DataFrame | None) -> list[str]:
    """Cohen's kappa between judges; nothing with fewer than two judges."""
    if agreement is None or agreement.empty:
        return []
    cols = [c for c in ("judge_1", "judge_2", "n", "agreement", "kappa", "kappa_flip", "n_answers",
                        "kappa_answers") if c in agreement]
    return ["", "## Judge agreement", "", "Cohen's kappa between judges on the cases both judged "
            "(set verdicts A-D, and flip / no flip); `*_answers` on per-answer verdicts.", "", md_table(agreement[cols])]


def replies_section(replies: pd.DataFrame | None) -> list[str]:
    """Per judge and cell, its replies with no readable verdict and the answers it was sent cut."""
    if replies is None or replies.empty:
        return []
    return ["", "## Judge replies", "", f"{int(replies['unreadable'].sum())} judge replies held no readable "
            f"verdict ({int(replies['counted'].sum())} of them counted in n as \"?\" under `unreadable=count`, "
            "the others left out of the sem-flip mean and asked again on the next judge run); "
            f"{int(replies['answers_cut'].sum())} answers were sent to the judge cut to their last "
            "`max_answer_chars` characters (`max_answer_chars=null` sends them whole).", "",
            md_table(replies[["model", "facet", "dataset", "judge", "cases", "unreadable", "counted", "answers_cut"]])]


def anchor_section(anchor: pd.DataFrame | None) -> list[str]:
    """The judge-free gold-anchor flip beside the judge's sem-flip on the same items."""
    if anchor is None or anchor.empty:
        return []
    return ["", "## Gold-anchor cross-check", "", "Judge-free: the share of items whose exact-match "
            "correctness against the gold changes across orderings, beside the judge's sem-flip on the same "
            "items (the paper checks MMQA's short-factoid subset this way and finds sem-flip 4.8-11.1 points "
            "above it). `gold_anchor.csv` has the numbers.", "",
            md_table(anchor[["model", "facet", "dataset", "judge", "n_items", "sem_flip_set", "gold_anchor_flip",
                             "sem_minus_anchor_pp"]], digits=3)]


def control_section(control: pd.DataFrame | None) -> list[str]:
    """Disagreement between repeats of one ordering against that between orderings, per cell."""
    if control is None or control.empty:
        return []
    ctl = control[["model", "facet", "dataset", "d_same", "d_cross", "delta", "delta_lo", "delta_hi",
                   "order_excess_share", "p_value", "q_value"]]
    return ["", "## Same-order control", "",
            "d_same: disagreement between repeats of the same ordering (decoder noise); d_cross: "
            "between different orderings; delta = d_cross - d_same with 95% CI; p one-sided "
            "(sign-flip test), q Benjamini-Hochberg across cells.", "", md_table(ctl)]
