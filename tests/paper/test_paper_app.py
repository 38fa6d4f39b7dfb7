"""`python -m facet_probe.paper` end to end on reference-policy runs: every target's files, numbers that follow
from the policies' definitions, and a cell two runs answer refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from facet_probe_dev.testing.in_process import Ran, run_module

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

ROOT = Path(__file__).resolve().parents[2]


def app(module: str, *args: str, keys: dict[str, str] | None = None) -> Ran:
    """`python -m <module> <args>` in this process, offline, with no API key but `keys` (no test reaches a real
    provider)."""
    return run_module(module, *args, cwd=ROOT, env=keys)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    sweep = tmp_path_factory.mktemp("runs")
    proc = app("facet_probe", "-m", "model=oracle,always_first", "facet=option_order", "dataset=synthetic_mcq",
               "limit=6", "progress=false", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr
    return sweep


def test_the_paper_app_builds_every_target_from_run_folders(runs, tmp_path):
    proc = app("facet_probe.paper", f"input={runs}", f"out={tmp_path}", "bootstrap=100")
    assert proc.returncode == 0, proc.stderr
    for name in ("table1.csv", "table1.tex", "fig_flip_facets.png", "fig_flip_facets.pdf", "table4_mitigation.csv",
                 "fig_pareto.png", "table_k_ablation.csv", "verify.csv"):
        assert (tmp_path / name).stat().st_size > 0, name
    t1 = pd.read_csv(tmp_path / "table1.csv").set_index(["model", "facet"])
    assert t1.loc[("oracle", "option_order"), "flip"] == 0.0
    assert t1.loc[("always_first", "option_order"), "flip"] == 1.0  # the first displayed option moves
    cells = pd.read_csv(tmp_path / "table4_mitigation_cells.csv").set_index(["model", "policy"])
    assert cells.loc[("oracle", "P1"), "accuracy"] == 1.0 and cells.loc[("oracle", "P5"), "accuracy"] == 1.0
    # always_first answers the first displayed option: right exactly under the orderings that put the gold first
    assert cells.loc[("always_first", "P6"), "accuracy"] >= cells.loc[("always_first", "P1"), "accuracy"]
    assert cells.loc[("always_first", "P2"), "coverage"] < 1.0
    assert "\\caption{" in (tmp_path / "table1.tex").read_text()


def test_two_runs_answering_one_cell_are_refused(runs, tmp_path):
    again = tmp_path / "again"
    proc = app("facet_probe", "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=5",
               "progress=false", f"hydra.run.dir={again}")
    assert proc.returncode == 0, proc.stderr
    proc = app("facet_probe.paper", f"input=[{runs},{again}]", f"out={tmp_path / 'out'}", "target=table1")
    assert proc.returncode == 2
    assert "is answered by 2 runs" in proc.stderr and "Traceback" not in proc.stderr


def test_an_unknown_target_names_the_valid_ones(runs, tmp_path):
    proc = app("facet_probe.paper", f"input={runs}", "target=table9")
    assert proc.returncode == 2 and "table4-mitigation" in proc.stderr


def test_table_decoder_draws_the_decoder_csv_with_the_papers_values_beside(tmp_path):
    grid = tmp_path / "grid" / "decoder_noise"
    grid.mkdir(parents=True)
    pd.DataFrame([{"model": "gemini_3_flash", "facet": "document_rank_order", "temperature": 0.0, "n_items": 10,
                   "d_same": 0.05, "d_cross": 0.08, "delta": 0.03, "order_excess_share": 0.375}]).to_csv(
        grid / "decoder_decomposition.csv", index=False)
    proc = app("facet_probe.paper", f"input={tmp_path / 'grid'}", f"out={tmp_path / 'out'}", "target=table-decoder")
    assert proc.returncode == 0, proc.stderr
    row = pd.read_csv(tmp_path / "out" / "table_decoder.csv").iloc[0]
    assert (row["paper_d_same"], row["paper_d_cross"], row["paper_delta"]) == (0.0423, 0.0639, 0.0216)


def test_paper_skips_a_target_without_inputs_and_says_why(runs, tmp_path):
    proc = app("facet_probe.paper", f"input={runs}", f"out={tmp_path}", "bootstrap=50")
    assert proc.returncode == 0, proc.stderr
    assert "table-decoder: skipped (no decoder_decomposition.csv" in proc.stdout


def odi_folder(root: Path) -> Path:
    """An ODI output folder in the ODI app's layout (facet_probe/odi/pipeline.py), with made-up numbers."""
    odi = root / "odi"
    (odi / "modal").mkdir(parents=True)
    (odi / "correct").mkdir()
    (odi / "odi_status.json").write_text('{"state": "complete"}')
    pd.DataFrame({"capability": ["accuracy", "theta_correct"], "rho": [-0.9, -0.8], "rho_lo": [-1.0, -1.0],
                  "rho_hi": [-0.5, -0.3], "n_models": [3, 3], "n_boot": [100, 100]}).to_csv(
        odi / "capability_flip.csv", index=False)
    pd.DataFrame({"model": ["a", "b", "c"], "flip_rate": [0.1, 0.5, 0.9], "accuracy": [0.9, 0.6, 0.3]}).to_csv(
        odi / "model_flip_rates.csv", index=False)
    pd.DataFrame({"model": ["a", "b", "c"], "theta_mean": [1.0, 0.0, -1.0]}).to_csv(odi / "correct" / "theta.csv",
                                                                                 index=False)
    for outcome, rule in (("modal", "drop_ties"), ("correct", None)):  # the paper's modal rule (odi.modal_rule)
        pd.DataFrame({"variant": "paper", "modal_rule": rule, "facet": ["option_order", "image_set_order"],
                      "n_items": [10, 10], "sigma_pi_median": [0.1, 0.2], "mean_abs_delta": [0.01, 0.03]}).to_csv(
            odi / outcome / "decomposition.csv", index=False)
    return odi


def test_odi_targets_read_the_odi_apps_outputs_with_the_papers_table2_beside(tmp_path):
    odi_folder(tmp_path)
    proc = app("facet_probe.paper", f"input={tmp_path / 'odi'}", f"out={tmp_path / 'out'}", "target=table2-odi")
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(tmp_path / "out" / "table2_odi.csv").set_index(["outcome", "facet"])
    assert table.loc[("modal", "image_set_order"), "paper_sigma_pi_median"] == pytest.approx(0.151824, abs=1e-6)
    assert pd.isna(table.loc[("correct", "image_set_order"), "paper_sigma_pi_median"])  # the paper's is modal
    proc = app("facet_probe.paper", f"input={tmp_path / 'odi'}", f"out={tmp_path / 'out'}", "target=fig-capability")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "fig_capability.png").stat().st_size > 0


def test_table_cot_order_pairs_cot_and_direct_runs_of_one_cell(tmp_path):
    sweep = tmp_path / "cot"
    proc = app("facet_probe", "-m", "model=position_biased", "facet=option_order", "dataset=synthetic_mcq", "limit=6",
               "prompt.cot=true,false", "progress=false", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr
    proc = app("facet_probe.paper", f"input={sweep}", f"out={tmp_path / 'out'}", "target=table-cot-order",
               "bootstrap=100")
    assert proc.returncode == 0, proc.stderr
    row = pd.read_csv(tmp_path / "out" / "table_cot_order.csv").iloc[0]
    assert row["n_items"] == 6 and str(row["baseline"]) == "False" and str(row["other"]) == "True"
    assert row["flip_difference"] == pytest.approx(row["flip_other"] - row["flip_baseline"])
