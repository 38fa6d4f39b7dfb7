"""Issue 39, point 14: a posterior is never shown as a result without its convergence. One verdict (R-hat max
<= 1.01 and min bulk ESS >= 400) and one label go into the ODI app's tables and figures and into every paper
table and figure built from the posterior; a smoke fit (odi=smoke declares it) says so."""

from __future__ import annotations

import json
import math
import shutil

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from hydra import compose, initialize_config_module

from facet_probe import api
from facet_probe.odi.__main__ import run_from_config
from facet_probe.odi.pipeline import run_odi
from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

SPEC = SimSpec(n_models=4, facets=("option_order",), items_per_facet=6, datasets_per_facet=1, sigma_pi=(0.5,),
               seed=3)


def config(*overrides):
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        return compose("odi_app", overrides=list(overrides))


@pytest.mark.parametrize(("rhat", "ess", "sampler", "converged"), [
    (1.004, 812.0, "nutpie", True),
    (1.01, 400.0, "nutpie", True),  # the limits themselves pass
    (1.011, 5000.0, "nutpie", False),
    (1.0, 399.0, "nutpie", False),
    (math.nan, 5000.0, "nutpie", False),  # unknown R-hat (one chain): never shown as converged
    (1.0, 5000.0, "advi", False),  # an approximation, not a posterior sample
])
def test_one_verdict_with_the_issues_limits(rhat, ess, sampler, converged):
    from facet_probe.odi.convergence import Convergence

    fit = Convergence(rhat, ess, sampler)
    assert fit.converged is converged and fit.result is converged
    assert ("not converged" in fit.label) is not converged


def test_the_label_names_the_numbers_and_a_smoke_fit():
    from facet_probe.odi.convergence import Convergence, caption_note

    fit = Convergence.of({"rhat_max": 2.49, "ess_bulk_min": 2.8, "sampler": "nutpie", "smoke": True})
    assert fit.label == "smoke fit, not converged (R-hat max 2.490 > 1.01, min bulk ESS 2.8 < 400)"
    assert not fit.result and fit.columns()["fit"] == fit.label
    assert not Convergence(1.0, 900.0, smoke=True).result  # a converged smoke fit is still no result
    assert Convergence.of(None).label == "not converged (R-hat max unknown, min bulk ESS unknown)"
    assert caption_note({"modal": fit}).startswith("NOT A RESULT")
    assert caption_note({"modal": Convergence(1.0, 900.0)}).startswith("Posterior fits: modal: converged")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return write_run_folder(simulate(SPEC), tmp_path_factory.mktemp("sim") / "run")


def test_the_smoke_config_declares_itself(runs):
    assert run_from_config(config(f"input={runs}", "odi=smoke")).fit.smoke is True
    assert run_from_config(config(f"input={runs}")).fit.smoke is False
    assert run_from_config(config(f"input={runs}", "odi=quick")).fit.smoke is False


def test_an_odi_figure_title_carries_the_label_in_red_unless_a_result():
    from facet_probe.odi.convergence import Convergence
    from facet_probe.odi.figures import fit_title

    fig = plt.figure()
    fit_title(fig, "positional variant, outcome correct", Convergence(2.49, 2.8, smoke=True))
    assert fig._suptitle.get_text().endswith("smoke fit, not converged (R-hat max 2.490 > 1.01, min bulk ESS 2.8 < 400)")
    assert fig._suptitle.get_color() == "firebrick"
    fit_title(fig, "t", Convergence(1.0, 900.0))
    assert fig._suptitle.get_text() == "t\nconverged (R-hat max 1.000, min bulk ESS 900)"
    assert fig._suptitle.get_color() == "black"
    plt.close(fig)


@pytest.fixture(scope="module")
def smoke_odi(runs, tmp_path_factory):
    """A real smoke fit (NUTS, 2 chains x 60 draws) of the correct outcome, as `make paper-offline` runs it."""
    out = tmp_path_factory.mktemp("smoke") / "odi"
    return run_odi(run_from_config(config(f"input={runs}", f"out={out}", "odi=smoke", "outcome=correct")))


def test_the_odi_apps_tables_carry_the_smoke_fits_verdict(smoke_odi):
    summary = json.loads((smoke_odi / "correct" / "fit_summary.json").read_text())
    assert summary["smoke"] is True and summary["converged"] is False
    assert summary["convergence"].startswith("smoke fit, not converged")
    for name in ("decomposition.csv", "theta.csv", "item_params.csv", "signed_delta.csv"):
        table = pd.read_csv(smoke_odi / "correct" / name)
        assert (table["rhat_max"] == summary["rhat_max"]).all() and (~table["converged"]).all(), name
        assert set(table["fit"]) == {summary["convergence"]}, name


def test_paper_tables_and_figures_from_the_posterior_say_not_converged(smoke_odi, tmp_path):
    """The join: table2-odi and fig-capability read the ODI folder's verdict and show it."""
    for target in ("table2-odi", "fig-capability"):
        api.paper([f"input={smoke_odi}", f"target={target}", f"out={tmp_path}"])
    label = json.loads((smoke_odi / "correct" / "fit_summary.json").read_text())["convergence"]
    table = pd.read_csv(tmp_path / "table2_odi.csv")
    assert set(table["fit"]) == {label} and not table["converged"].any()
    assert {"rhat_max", "ess_bulk_min"} <= set(table.columns)
    tex = (tmp_path / "table2_odi.tex").read_text()
    assert "NOT A RESULT" in tex and "smoke fit, not converged" in tex and "rhat\\_max" in tex
    assert "NOT A RESULT" in (tmp_path / "table2_odi_theta.tex").read_text()
    points = pd.read_csv(tmp_path / "fig_capability_points.csv")
    assert set(points["fit"]) == {label} and not points["converged"].any()
    assert "smoke fit, not converged" in (tmp_path / "fig_capability_points.tex").read_text()
    assert (tmp_path / "fig_capability.png").stat().st_size > 0


def test_an_odi_folder_without_diagnostics_is_never_shown_as_converged(smoke_odi, tmp_path):
    older = shutil.copytree(smoke_odi, tmp_path / "odi")  # as an ODI folder written before fit_summary.json
    (older / "correct" / "fit_summary.json").unlink()
    api.paper([f"input={older}", "target=table2-odi", f"out={tmp_path / 'out'}"])
    table = pd.read_csv(tmp_path / "out" / "table2_odi.csv")
    assert set(table["fit"]) == {"not converged (R-hat max unknown, min bulk ESS unknown)"}
