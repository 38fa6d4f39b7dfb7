"""Write a paper target's outputs: a table as CSV and LaTeX, a figure as PNG and PDF (atomic writes)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from facet_probe.core.untrusted import latex_text
from facet_probe.store.atomic import atomic_path, atomic_write_text
from facet_probe.store.csv_tables import write_csv


def latex_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell and column label as LaTeX that prints it verbatim (`core.untrusted`):
    model and dataset names are the user's text; numbers stay numbers, for the table's rounding."""
    return frame.map(lambda v: latex_text(v) if isinstance(v, str) else v).rename(columns=latex_text)


def write_table(frame: pd.DataFrame, out: Path, name: str, caption: str, latex: pd.DataFrame | None = None,
                digits: int = 3) -> list[Path]:
    """`<name>.csv` (every column, full precision) and `<name>.tex` (`latex`, or the frame, rounded; the
    caption says what the table is and how it was computed)."""
    out.mkdir(parents=True, exist_ok=True)
    csv = out / f"{name}.csv"
    write_csv(frame, csv)
    shown = latex_cells(frame if latex is None else latex)
    style = shown.style.format(precision=digits, na_rep="--").hide(axis="index")
    tex = style.to_latex(caption=latex_text(caption), label=f"tab:{name}", hrules=True, position="t")
    tex_path = out / f"{name}.tex"
    atomic_write_text(tex_path, tex)
    return [csv, tex_path]


def write_figure(fig, out: Path, name: str) -> list[Path]:
    """`<name>.png` (150 dpi) and `<name>.pdf`, then close the figure."""
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix, kw in ((".png", {"dpi": 150}), (".pdf", {})):
        path = out / f"{name}{suffix}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, bbox_inches="tight", **kw)
        paths.append(path)
    plt.close(fig)
    return paths
