"""Capability vs flip: flip rates per model and a bootstrap Spearman interval."""

import numpy as np
import pandas as pd
import pytest

from facet_probe.odi.capability import model_flip_rates, spearman_bootstrap


def test_flip_rate_is_the_share_of_items_whose_answer_changes():
    rows = []
    for item, answers in {"d::1": "AAA", "d::2": "ABA"}.items():
        rows += [{"model": "m", "facet": "f", "item_id": item, "answer_normalized": a, "correct": a == "A"}
                 for a in answers]
    rows += [{"model": "n", "facet": "f", "item_id": "d::1", "answer_normalized": a, "correct": False}
             for a in ["B", "<parse_error>"]]
    table = model_flip_rates(pd.DataFrame(rows)).set_index("model")
    assert table.loc["m", "flip_rate"] == 0.5 and table.loc["n", "flip_rate"] == 1.0
    assert table.loc["m", "accuracy"] == pytest.approx(5 / 6)


def test_spearman_bootstrap_brackets_a_strong_negative_relation():
    rng = np.random.default_rng(0)
    ability = rng.normal(size=18)
    flip = 0.3 - 0.1 * ability + rng.normal(0, 0.02, 18)
    stats = spearman_bootstrap(ability, flip, n_boot=500)
    assert stats["rho"] < -0.8 and stats["rho_lo"] <= stats["rho"] <= stats["rho_hi"] < 0


def test_posterior_draws_widen_the_interval():
    rng = np.random.default_rng(1)
    ability = rng.normal(size=12)
    flip = -ability + rng.normal(0, 0.3, 12)
    draws = ability + rng.normal(0, 1.0, size=(400, 12))
    point = spearman_bootstrap(ability, flip, n_boot=800)
    noisy = spearman_bootstrap(ability, flip, draws, n_boot=800)
    assert noisy["rho_hi"] - noisy["rho_lo"] > point["rho_hi"] - point["rho_lo"]


def test_too_few_models_is_an_error():
    with pytest.raises(ValueError, match=">= 3 models"):
        spearman_bootstrap(np.array([1.0, 2.0]), np.array([0.1, 0.2]))
