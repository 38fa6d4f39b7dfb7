"""The report's figures as a reader sees them: labels inside the canvas, zero bars readable, models told
apart, no lines between unrelated orderings, legends off the data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from facet_probe.report import figure_process, figures


def summary(models=("tiny_vlm",)) -> pd.DataFrame:
    rows = []
    for m, model in enumerate(models):
        for facet, dataset, rate in [("document_rank_order", "synthetic_docs", 0.0),
                                     ("evidence_chunk_order", "synthetic_evidence", 0.215),
                                     ("option_order", "synthetic_visual_mcq", 0.045)]:
            rows.append({"model": model, "facet": facet, "dataset": dataset, "flip_rate": rate + 0.1 * m,
                         "flip_rate_lo": max(rate - 0.05, 0), "flip_rate_hi": rate + 0.05 + 0.1 * m,
                         "accuracy": 0.9 - 0.2 * m})
    return pd.DataFrame(rows)


def trials() -> pd.DataFrame:
    rows = [{"model": model, "facet": facet, "ordering_idx": o, "correct": (i + o) % 3 != 0}
            for model in ("a", "b") for facet in ("option_order", "evidence_chunk_order")
            for o in range(6) for i in range(20)]
    return pd.DataFrame(rows)


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
    colours = {tuple(c) for points in fig.axes[0].collections for c in points.get_facecolors()}
    assert len(colours) == 2  # one colour per model (each facet's points are one artist, coloured per point)


def test_accuracy_per_ordering_has_a_panel_per_facet_draws_no_line_between_orderings_and_names_each_model_once():
    fig = figures.accuracy_per_ordering_figure(figure_process.ordering_accuracy(trials()))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["evidence_chunk_order", "option_order"]
    for ax in panels:
        joined = [line for line in ax.get_lines()
                  if len(line.get_xdata()) > 1 and line.get_linestyle() not in ("None", "none", "")]
        assert joined == []
    renderer = drawn(fig)
    legends = [ax.get_legend() for ax in panels if ax.get_legend() is not None]
    assert len(legends) == 1 and [t.get_text() for t in legends[0].get_texts()] == ["a", "b"]
    box = legends[0].get_window_extent(renderer)
    assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in panels)
    assert inside(box, fig)


def test_a_paper_scale_panel_gets_one_legend_entry_per_model_not_per_series():
    """18 models x 5 facets: 18 legend entries (one axes with 90 entries could not be read or laid out)."""
    rows = [{"model": f"policy_{m:02d}", "facet": f"facet_{f}", "ordering_idx": o, "correct": (m + o + i) % 4 != 0}
            for m in range(18) for f in range(5) for o in range(6) for i in range(4)]
    fig = figures.accuracy_per_ordering_figure(figure_process.ordering_accuracy(pd.DataFrame(rows)))
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 5
    legend = next(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)
    assert len(legend.get_texts()) == 18


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
    paths = figure_process.ReportFigures(summary(), figure_process.ordering_accuracy(trials())).draw(tmp_path)
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
