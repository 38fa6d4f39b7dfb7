"""Capability vs flip: flip rates per model and a bootstrap Spearman interval."""

import numpy as np
import pandas as pd
import pytest

from facet_probe.odi.capability import model_flip_rates, spearman_bootstrap


def trial_rows(model: str, facet: str, dataset: str, item: str, answers: str, repeat: int = 0) -> list[dict]:
    return [{"model": model, "facet": facet, "dataset": dataset, "item_id": item, "ordering_idx": o,
             "repeat_idx": repeat, "answer_normalized": a, "correct": a == "A"} for o, a in enumerate(answers)]


def test_flip_rate_is_the_share_of_items_whose_answer_changes():
    rows = trial_rows("m", "f", "d", "d::1", "AAA") + trial_rows("m", "f", "d", "d::2", "ABA")
    rows += [{"model": "n", "facet": "f", "dataset": "d", "item_id": "d::1", "ordering_idx": o,
              "answer_normalized": a, "correct": False} for o, a in enumerate(["B", "<parse_error>"])]
    table = model_flip_rates(pd.DataFrame(rows)).set_index("model")
    assert table.loc["m", "flip_rate"] == 0.5 and table.loc["n", "flip_rate"] == 1.0
    assert table.loc["m", "accuracy"] == pytest.approx(5 / 6)


def test_flip_rate_reads_repeat_0_only():
    """Issue 21.10: repeats of the same ordering are decoder noise, not order; pooled they made stable items
    look flipped (0.9575 for position_biased against 0.8958 on repeat 0)."""
    rows = trial_rows("m", "option_order", "d", "d::1", "AAAAAA")
    rows += trial_rows("m", "option_order", "d", "d::1", "ABABAB", repeat=1)
    rows += trial_rows("m", "option_order", "d", "d::2", "AAAAAA") + trial_rows("m", "option_order", "d", "d::2", "AAAAAA", 1)
    table = model_flip_rates(pd.DataFrame(rows)).set_index("model")
    assert table.loc["m", "flip_rate"] == 0.0 and table.loc["m", "accuracy"] == 1.0


def test_flip_rate_is_the_mean_over_facets_of_dataset_mean_flip_rates():
    """The paper's aggregation (metrics.paper_tables): items -> dataset means -> the mean over the main facets."""
    rows = trial_rows("m", "option_order", "d1", "d1::1", "ABAAAA")  # d1: 1 of 1 items flips
    for i in range(3):  # d2: 0 of 3
        rows += trial_rows("m", "option_order", "d2", f"d2::{i}", "AAAAAA")
    for i in range(2):  # another main facet: 0 of 2
        rows += trial_rows("m", "evidence_chunk_order", "d3", f"d3::{i}", "AAAAAA")
    rows += trial_rows("m", "few_shot_order", "d4", "d4::1", "ABABAB")  # not a main facet: left out
    table = model_flip_rates(pd.DataFrame(rows)).set_index("model")
    assert table.loc["m", "flip_rate"] == pytest.approx(((1 + 0) / 2 + 0) / 2)


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


def test_flip_rate_is_table_ones_mean5_screened_and_judged():
    """Issue 39.3: the per-model flip is the value Table 1 prints: image-set items the screen drops are left
    out, and an item the judge judged takes its sem-flip; the source is named."""
    rows = trial_rows("m", "image_set_order", "mantis_eval", "mantis_eval::keep", "AAAAAA")
    rows += trial_rows("m", "image_set_order", "mantis_eval", "mantis_eval::pos", "ABABAB")  # screened out
    rows += trial_rows("m", "mixed_modality_order", "mmqa", "mmqa::1", "ABCDEF")  # exact: both flip
    rows += trial_rows("m", "mixed_modality_order", "mmqa", "mmqa::2", "ABCDEF")
    items = {("mantis_eval", "mantis_eval::pos"): {"metadata": {"position_screen": {"verdict": "exclude"}}}}
    semantic = pd.DataFrame({"judge": "j", "model": "m", "facet": "mixed_modality_order", "dataset": "mmqa",
                             "item_id": ["mmqa::1", "mmqa::2"], "repeat_idx": 0, "sem_flip_set": [0.0, 1.0]})
    row = model_flip_rates(pd.DataFrame(rows), items, semantic).set_index("model").loc["m"]
    assert row["flip_rate"] == pytest.approx((0.0 + 0.5) / 2)  # unscreened, exact: (0.5 + 1.0) / 2
    assert row["flip_source"] == "exact_match+sem_flip_set_j"
    assert row["flip_rate_lo"] <= row["flip_rate"] <= row["flip_rate_hi"]


def test_the_capability_table_says_where_the_flips_come_from():
    from facet_probe.odi.pipeline import OdiRun, capability_table

    flips = pd.DataFrame({"model": ["a", "b", "c"], "flip_rate": [0.1, 0.2, 0.3], "accuracy": [0.9, 0.7, 0.5],
                          "flip_source": ["exact_match+sem_flip_set_j", "exact_match", "exact_match"]})
    table = capability_table(flips, {}, {}, OdiRun(inputs=[], bootstrap=50))
    assert table["flip_source"].tolist() == ["exact_match+sem_flip_set_j"]
    assert table["rho"].tolist() == [-1.0]


def test_a_fitted_model_without_a_mean5_flip_is_left_out_of_theta_vs_flip_and_named():
    """A model audited only on a plug-in facet has a theta but no mean5 flip (Table 1 prints none for it): the
    theta comparison runs over the models that have both and says which it left out (it crashed the ODI app)."""
    from types import SimpleNamespace

    import arviz as az

    from facet_probe.odi.pipeline import OdiRun, capability_table

    flips = pd.DataFrame({"model": ["a", "b", "c"], "flip_rate": [0.1, 0.2, 0.3], "accuracy": [0.9, 0.7, 0.5],
                          "flip_source": ["exact_match"] * 3})
    theta = np.array([3.0, 2.0, 1.0, 0.0])[None, None, :] + np.random.default_rng(0).normal(0, 0.01, (2, 50, 4))
    fits = {"correct": az.from_dict(posterior={"theta": theta})}
    datasets = {"correct": SimpleNamespace(models=["a", "b", "c", "plugin_only"])}
    table = capability_table(flips, fits, datasets, OdiRun(inputs=[], bootstrap=50)).set_index("capability")
    assert table.loc["theta_correct", "rho"] == -1.0 and table.loc["theta_correct", "n_models"] == 3
    assert table.loc["theta_correct", "models_left_out"] == "plugin_only"
