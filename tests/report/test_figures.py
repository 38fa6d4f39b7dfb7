"""The report's figures as a reader sees them: labels inside the canvas, zero bars readable, models told
apart, every cell's marker whole and apart from the others', intervals drawn, datasets never pooled, legends off
the data; and the attack's loss curves readable at any number of samples."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.container import ErrorbarContainer

from facet_probe.metrics.flips import ordering_accuracy
from facet_probe.report import figure_process, figures


def summary(models=("tiny_vlm",)) -> pd.DataFrame:
    rows = []
    for m, model in enumerate(models):
        for facet, dataset, rate in [("document_rank_order", "synthetic_docs", 0.0),
                                     ("evidence_chunk_order", "synthetic_evidence", 0.215),
                                     ("option_order", "synthetic_visual_mcq", 0.045)]:
            rows.append({"model": model, "facet": facet, "dataset": dataset, "flip_rate": rate + 0.1 * m,
                         "flip_rate_lo": max(rate - 0.05, 0), "flip_rate_hi": rate + 0.05 + 0.1 * m,
                         "accuracy": 0.9 - 0.2 * m, "accuracy_lo": 0.8 - 0.2 * m, "accuracy_hi": 0.95 - 0.2 * m})
    return pd.DataFrame(rows)


def trials() -> pd.DataFrame:
    """Two models on two datasets of option_order and one of evidence_chunk_order, 20 items x 6 orderings."""
    rows = [{"model": model, "facet": facet, "dataset": dataset, "item_id": f"{dataset}::{i}", "ordering_idx": o,
             "answer_normalized": "A" if (i + o) % 3 else "B", "correct": (i + o) % 3 != 0}
            for model in ("a", "b") for facet, dataset in (("option_order", "synthetic_mcq"),
                                                           ("option_order", "synthetic_visual_mcq"),
                                                           ("evidence_chunk_order", "synthetic_evidence"))
            for o in range(6) for i in range(20)]
    return pd.DataFrame(rows)


def ordering() -> pd.DataFrame:
    """What the accuracy-across-orderings figure draws from `trials()`."""
    return ordering_accuracy(trials(), n_boot=50)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def drawn(fig):
    fig.tight_layout()
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def inside(box, fig) -> bool:
    canvas = fig.bbox
    return box.x0 >= canvas.x0 - 1 and box.x1 <= canvas.x1 + 1 and box.y0 >= canvas.y0 - 1 and box.y1 <= canvas.y1 + 1


def test_flip_rate_x_label_is_inside_the_canvas():
    fig = figures.flip_rate_figure(summary())
    renderer = drawn(fig)
    ax = fig.axes[0]
    assert inside(ax.xaxis.label.get_window_extent(renderer), fig)


def test_a_zero_bar_shows_its_value():
    fig = figures.flip_rate_figure(summary())
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "0.000" in texts and "0.215" in texts and "0.045" in texts


def test_accuracy_vs_flip_names_every_model():
    fig = figures.accuracy_vs_flip_figure(summary(models=("model_a", "model_b")))
    legend = fig.axes[0].get_legend()
    labels = {t.get_text() for t in legend.get_texts()}
    assert {"model_a", "model_b"} <= labels
    points = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    colours = {tuple(c) for p in points for c in p.get_facecolors()}
    assert len(colours) == 2  # one colour per model (each dataset's points are one artist, coloured per point)


def coincident_summary() -> pd.DataFrame:
    """An oracle (accuracy 1, no flip) and an always-first policy (accuracy 1/4, no flip) on three datasets, two
    of one facet, and a position-biased policy flipping everywhere (flip rate 1): cells on the axes' edges, six
    of them two by two at one value each."""
    rows = []
    for (facet, dataset), (model, acc, flip) in itertools.product(
            [("option_order", "synthetic_mcq"), ("option_order", "synthetic_visual_mcq"),
             ("document_rank_order", "synthetic_docs")],
            [("oracle", 1.0, 0.0), ("always_first", 0.25, 0.0), ("position_biased", 0.5, 1.0)]):
        rows.append({"model": model, "facet": facet, "dataset": dataset, "accuracy": acc, "flip_rate": flip,
                     "accuracy_lo": max(acc - 0.1, 0), "accuracy_hi": acc, "flip_rate_lo": max(flip - 0.05, 0),
                     "flip_rate_hi": min(flip + 0.05, 1)})
    return pd.DataFrame(rows)


def markers_on_screen(fig) -> tuple[np.ndarray, float]:
    """Every scatter marker's centre in pixels, and a marker's radius in pixels."""
    drawn(fig)
    ax = fig.axes[0]
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    centres = np.vstack([ax.transData.transform(c.get_offsets()) for c in points])
    radius = np.sqrt(points[0].get_sizes()[0]) / 2 * fig.dpi / 72
    return centres, radius


def test_accuracy_vs_flip_shows_every_cell_apart_and_whole_inside_the_axes():
    fig = figures.accuracy_vs_flip_figure(coincident_summary())
    centres, radius = markers_on_screen(fig)
    assert len(centres) == 9
    gaps = [np.hypot(*(a - b)) for a, b in itertools.combinations(centres, 2)]
    assert min(gaps) >= 2 * radius  # no marker hides another
    box = fig.axes[0].get_window_extent()
    assert (centres[:, 0] - radius >= box.x0).all() and (centres[:, 0] + radius <= box.x1).all()
    assert (centres[:, 1] - radius >= box.y0).all() and (centres[:, 1] + radius <= box.y1).all()  # none clipped


def test_accuracy_vs_flip_draws_both_intervals_and_tells_two_datasets_of_a_facet_apart():
    summary = coincident_summary()
    fig = figures.accuracy_vs_flip_figure(summary)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    x_bars, y_bars = bars.lines[2]
    assert len(x_bars.get_segments()) == len(y_bars.get_segments()) == len(summary)
    lengths = sorted(round(abs(s[1][1] - s[0][1]), 6) for s in y_bars.get_segments())
    assert lengths == sorted(round(h - lo, 6) for lo, h in zip(summary["flip_rate_lo"], summary["flip_rate_hi"],
                                                                strict=True))
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {"option_order / synthetic_mcq", "option_order / synthetic_visual_mcq"} <= labels
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len({c.get_paths()[0].vertices.tobytes() for c in points}) == 3  # a marker per facet and dataset


def test_ordering_accuracy_is_each_cells_worst_expected_and_best_ordering_over_its_items():
    """Per item over its orderings (repeat 0): min, mean and max of the correct answers, averaged over the cell's
    items; a parse error is wrong. The reference's P5 / P6 rule, written here on its own."""
    answers = {"i1": ["A", "A", "A"], "i2": ["A", "B", "?"], "i3": ["B", "B", "B"]}  # gold A; "?" a parse error
    rows = [{"model": "m", "facet": "option_order", "dataset": "d", "item_id": item, "ordering_idx": o,
             "repeat_idx": r, "answer_normalized": a if r == 0 else "B", "correct": a == "A" if r == 0 else False,
             "parse_status": "parse_error" if a == "?" else "ok"}
            for item, given in answers.items() for o, a in enumerate(given) for r in (0, 1)]
    cells = ordering_accuracy(pd.DataFrame(rows), n_boot=20)
    per_item = {item: [a == "A" for a in given] for item, given in answers.items()}
    assert cells.loc[0, "worst_ordering_accuracy"] == pytest.approx(np.mean([min(v) for v in per_item.values()]))
    assert cells.loc[0, "accuracy"] == pytest.approx(np.mean([np.mean(v) for v in per_item.values()]))
    assert cells.loc[0, "best_ordering_accuracy"] == pytest.approx(np.mean([max(v) for v in per_item.values()]))
    assert {"accuracy_lo", "accuracy_hi", "best_ordering_accuracy_lo", "worst_ordering_accuracy_hi"} <= set(cells)


def test_accuracy_per_ordering_shows_per_cell_the_worst_expected_and_best_with_intervals_never_pooling_datasets():
    fig = figures.accuracy_per_ordering_figure(ordering())
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["evidence_chunk_order / synthetic_evidence",
                                                 "option_order / synthetic_mcq", "option_order / synthetic_visual_mcq"]
    for ax in panels:
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == 3 and all(c.has_xerr for c in bars)  # worst, expected, best: each with its CI
        assert ax.get_xlim()[0] < 0 and ax.get_xlim()[1] > 1  # a marker at 0 or 1 is drawn whole
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["a", "b"]  # a row per model, shared
    renderer = drawn(fig)
    legend = next(ax.get_legend() for ax in panels if ax.get_legend() is not None)
    assert [t.get_text().split(" ")[0] for t in legend.get_texts()] == ["best", "expected:", "worst"]
    assert inside(legend.get_window_extent(renderer), fig)
    assert not any(legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)) for ax in panels)


def test_a_paper_scale_accuracy_across_orderings_has_a_panel_per_cell_group_and_three_legend_entries():
    """18 models x 6 facet / dataset cells: six panels of 18 rows, one legend of 3 entries."""
    rows = [{"model": f"policy_{m:02d}", "facet": f"facet_{f // 2}", "dataset": f"set_{f}", "item_id": str(i),
             "ordering_idx": o, "answer_normalized": "A", "correct": (m + o + i) % 4 != 0}
            for m in range(18) for f in range(6) for o in range(6) for i in range(4)]
    fig = figures.accuracy_per_ordering_figure(ordering_accuracy(pd.DataFrame(rows), n_boot=20))
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 6
    legend = next(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)
    assert len(legend.get_texts()) == 3


@pytest.mark.parametrize("n_models", [1, 36])
def test_the_flip_rate_bars_leave_at_most_one_rows_pitch_blank_above_and_below(n_models):
    """Matplotlib's default 5% margin is half a bar at 3 cells but five blank rows at 108."""
    fig = figures.flip_rate_figure(summary(tuple(f"m{i}" for i in range(n_models))))
    ax = fig.axes[0]
    rows = ax.get_yticks()  # every labelled row: the cells' bars and their groups' headings
    low, high = sorted(ax.get_ylim())
    assert min(rows) - low <= 1.0 and high - max(rows) <= 1.0


def test_the_flip_rate_bars_name_the_model_under_a_heading_per_facet_and_dataset():
    fig = figures.flip_rate_figure(summary(("model_a", "model_b")))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    by_row = [label for _, label in sorted(zip(fig.axes[0].get_yticks(), labels, strict=True))]
    assert by_row == ["document_rank_order / synthetic_docs", "model_a", "model_b",
                      "evidence_chunk_order / synthetic_evidence", "model_a", "model_b",
                      "option_order / synthetic_visual_mcq", "model_a", "model_b"]


def test_a_reports_figures_are_saved_as_pngs_under_their_names(tmp_path):
    paths = figure_process.ReportFigures(summary(), ordering()).draw(tmp_path)
    assert [p.name for p in paths] == list(figure_process.ReportFigures.NAMES)
    for path in paths:
        assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_legend_the_layout_cannot_fit_grows_the_saved_canvas_and_one_that_fits_keeps_its_size(tmp_path):
    """The layout makes room for a legend beside the axes; a legend taller than the figure cannot get room that
    way, so the saved PNG grows to hold it instead of cutting it off."""
    from PIL import Image

    fits = Image.open(figures.save(figures.accuracy_vs_flip_figure(summary(("a", "b"))), tmp_path / "fits.png")).size
    assert fits == (round(8 * 110), round(4.8 * 110))  # the figure's own canvas: one drawing pass
    many = summary(tuple(f"model-with-a-long-name-{i:02d}" for i in range(60)))
    grown = Image.open(figures.save(figures.accuracy_vs_flip_figure(many), tmp_path / "grown.png")).size
    assert grown[1] > fits[1]  # every legend entry is on the canvas
