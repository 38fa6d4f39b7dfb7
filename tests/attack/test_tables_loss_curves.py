"""The attack's loss_curves.png as a reader sees it: a few samples a line each, named; many summarised."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from facet_probe.attack.tables import CURVE_LINES_MAX, loss_curves_figure


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def curve_rows(n: int) -> list[dict]:
    rng = np.random.default_rng(0)
    return [{"sample_id": f"scienceqa::{i}", "curve": {"loss": list(np.cumsum(rng.normal(-0.1, 0.2, 30))),
                                                         "answer_ce": list(rng.random(30))}} for i in range(n)]


def test_the_loss_curves_name_a_few_samples_and_summarise_many():
    meta = {"model": "llava15_7b", "dataset": "scienceqa", "attack": "stop_reasoning", "mode": "cot"}
    few = loss_curves_figure(curve_rows(3), meta)
    assert [t.get_text() for t in few.axes[-1].get_legend().get_texts()] == [f"scienceqa::{i}" for i in range(3)]
    many = loss_curves_figure(curve_rows(CURVE_LINES_MAX * 25), meta)
    for ax in many.axes:
        assert len(ax.get_lines()) == 1  # the median, not 200 lines
    labels = [t.get_text() for t in many.axes[-1].get_legend().get_texts()]
    assert labels[-1] == f"median of {CURVE_LINES_MAX * 25} samples" and "middle half (25-75%)" in labels
