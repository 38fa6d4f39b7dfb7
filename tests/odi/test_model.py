"""The ODI models: the sampling parametrisation keeps the reference's prior; variants refuse bad data."""

import numpy as np
import pymc as pm
import pytest
from scipy.stats import ks_2samp

from facet_probe.core.errors import EXIT_USER_ERROR
from facet_probe.odi.data import build_odi_data
from facet_probe.odi.model import Priors, build_model
from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder
from facet_probe_dev.testing.in_process import run_module

SPEC = SimSpec(n_models=3, facets=("option_order", "evidence_chunk_order"), items_per_facet=4,
               datasets_per_facet=2, sigma_pi=(0.3, 1.0), seed=2)


def reference_prior(n: int, k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Direct draws of the reference's generative prior for one cell, one item and ordering 0 and 1."""
    p = Priors()
    mu_beta = rng.normal(0, p.mu_beta_sd, n)
    sigma_beta = np.abs(rng.normal(0, p.sigma_beta_sd, n))
    beta = mu_beta + sigma_beta * rng.normal(size=n)
    sigma_delta = np.abs(rng.normal(0, p.sigma_delta_sd, n))
    delta = sigma_delta[:, None] * rng.normal(size=(n, k))
    return {"mu_beta": mu_beta, "beta": beta, "delta0": delta[:, 0], "delta1": delta[:, 1]}


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
@pytest.mark.filterwarnings("ignore:The effect of Potentials")  # prior draws: the likelihood is meant to be off
def test_the_ridge_free_parametrisation_has_the_reference_prior():
    data = build_odi_data(simulate(SPEC).trials, "correct")
    model = build_model(data, "paper")
    with model:
        prior = pm.sample_prior_predictive(draws=3000, var_names=["mu_beta", "beta", "delta"], random_seed=3).prior
    cell = data.item_cell[0]
    ours = {"mu_beta": prior["mu_beta"].values[0, :, cell], "beta": prior["beta"].values[0, :, 0],
            "delta0": prior["delta"].values[0, :, cell, 0], "delta1": prior["delta"].values[0, :, cell, 1]}
    ref = reference_prior(3000, data.n_orderings, np.random.default_rng(4))
    for name in ours:
        assert ks_2samp(ours[name], ref[name]).pvalue > 0.001, name
    # orderings are a priori independent, and so are the cell's mean difficulty and its delta
    assert abs(np.corrcoef(ours["delta0"], ours["delta1"])[0, 1]) < 0.06
    assert abs(np.corrcoef(ours["mu_beta"], ours["delta0"])[0, 1]) < 0.06


def test_the_positional_variant_refuses_data_without_located_components():
    sim = simulate(SPEC)
    data = build_odi_data(sim.trials, "correct", {}, positional=True)  # no items: only option_order located
    with pytest.raises(ValueError, match="evidence_chunk_order.*items.jsonl"):
        build_model(data, "positional")
    with pytest.raises(ValueError, match="positional=True"):
        build_model(build_odi_data(sim.trials, "correct"), "positional")


def test_unknown_variant_is_an_error():
    with pytest.raises(ValueError, match="positional, paper"):
        build_model(build_odi_data(simulate(SPEC).trials, "correct"), "ordinal")


def test_a_misspelt_variant_is_one_line_naming_the_setting_the_choices_and_the_nearest(tmp_path):
    """`odi.variant=positonal` was refused without the setting's name or the nearest choice: `parse_variant`
    raised a plain ValueError (a crash to the apps' error boundary wherever no wrapper turns it into a line)."""
    sim = simulate(SimSpec(n_models=2, facets=("option_order",), items_per_facet=3, datasets_per_facet=1, seed=1))
    folder = write_run_folder(sim, tmp_path / "run")
    proc = run_module("facet_probe.odi", f"input={folder}", "odi.variant=positonal", "dry_run=true")
    assert proc.returncode == EXIT_USER_ERROR and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == ("error: odi: odi.variant must be one of positional, paper; got 'positonal'; "
                                   "did you mean 'odi.variant=positional'?")


def test_both_variants_share_the_item_parameters_and_differ_in_the_bias_term():
    sim = simulate(SPEC)
    paper = build_model(build_odi_data(sim.trials, "correct"), "paper")
    positional = build_model(build_odi_data(sim.trials, "correct", sim.facts, positional=True), "positional")
    shared = {"theta", "beta", "alpha", "sigma_pi"}
    assert shared <= set(paper.named_vars) and shared <= set(positional.named_vars)
    assert "delta" in paper.named_vars and "delta_position" in positional.named_vars
    assert positional["delta_position"].eval().shape == (2, 3)
