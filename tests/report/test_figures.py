"""The report's figures as a reader sees them: labels inside the canvas, zero bars readable, models told
apart, no lines between unrelated orderings, legends off the data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from facet_probe.report import figures


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
    colours = {tuple(c.get_facecolor()[0]) for c in fig.axes[0].collections}
    assert len(colours) == 2  # one colour per model


def test_accuracy_per_ordering_draws_no_line_between_orderings_and_its_legend_is_off_the_data():
    fig = figures.accuracy_per_ordering_figure(trials())
    ax = fig.axes[0]
    joined = [line for line in ax.get_lines() if len(line.get_xdata()) > 1 and line.get_linestyle() not in ("None", "none", "")]
    assert joined == []
    renderer = drawn(fig)
    legend = ax.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(ax.get_window_extent(renderer))
    assert len(ax.get_legend().get_texts()) == 4


def test_saved_figures_are_pngs(tmp_path):
    for path in (figures.flip_rate_per_cell(summary(), tmp_path / "a.png"),
                 figures.accuracy_vs_flip(summary(), tmp_path / "b.png"),
                 figures.accuracy_per_ordering(trials(), tmp_path / "c.png")):
        assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_legend_the_layout_cannot_fit_grows_the_saved_canvas_and_one_that_fits_keeps_its_size(tmp_path):
    """The layout makes room for a legend beside the axes; a legend taller than the figure cannot get room that
    way, so the saved PNG grows to hold it instead of cutting it off."""
    from PIL import Image

    fits = Image.open(figures.accuracy_vs_flip(summary(("a", "b")), tmp_path / "fits.png")).size
    assert fits == (round(8 * 110), round(4.8 * 110))  # the figure's own canvas: one drawing pass
    many = summary(tuple(f"model-with-a-long-name-{i:02d}" for i in range(60)))
    grown = Image.open(figures.accuracy_vs_flip(many, tmp_path / "grown.png")).size
    assert grown[1] > fits[1]  # every legend entry is on the canvas
