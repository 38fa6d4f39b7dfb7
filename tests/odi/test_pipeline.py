"""`python -m facet_probe.odi`: config composition, dry run, and a full (small) run folder."""

import json

import pandas as pd
import pytest
from hydra import compose, initialize_config_module

from facet_probe.odi.__main__ import run_from_config
from facet_probe.odi.pipeline import run_odi
from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder

SPEC = SimSpec(n_models=5, facets=("option_order", "evidence_chunk_order"), items_per_facet=8,
               datasets_per_facet=2, sigma_pi=(0.3, 1.2), seed=5)


def config(*overrides, with_hydra: bool = False):
    """The ODI app's composed config (`with_hydra`: with its `hydra` node, as the app runs it)."""
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        return compose("odi_app", overrides=list(overrides), return_hydra_config=with_hydra)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    return write_run_folder(simulate(SPEC), tmp_path_factory.mktemp("odi") / "run")


def test_config_composes_into_a_typed_run(run_folder):
    run = run_from_config(config(f"input={run_folder}", "outcome=correct", "odi.variant=positional",
                                 "odi.sampler=advi", "odi.priors.position_sd=0.5", "odi.pytensor_mode=fast_compile"))
    assert run.outcomes == ("correct",) and run.variant == "positional"
    assert run.fit.sampler == "advi" and run.priors.position_sd == 0.5 and run.fit.nutpie_backend in ("jax", "numba")
    assert run.fit.pytensor_mode == "fast_compile"
    assert run_from_config(config(f"input=[{run_folder},{run_folder}]")).inputs == [str(run_folder)] * 2
    assert run_from_config(config(f"input={run_folder}", "odi=quick")).fit.sampler == "advi"


def test_dry_run_summarises_and_writes_nothing(run_folder, capsys):
    assert run_odi(run_from_config(config(f"input={run_folder}", "dry_run=true", "odi.variant=positional"))) is None
    summary = json.loads(capsys.readouterr().out)
    assert summary["outcomes"]["modal"]["n_trials"] == 5 * 16 * 6
    assert summary["outcomes"]["correct"]["located_items_per_facet"] == {"evidence_chunk_order": 8, "option_order": 8}
    assert summary["outcomes"]["modal"]["modal_rule"] == "break_ties"  # the positional variant's default rule
    assert not (run_folder / "odi").exists()


def test_the_paper_variant_builds_the_modal_outcome_by_the_references_rule_and_says_what_it_dropped(run_folder,
                                                                                                    capsys):
    """Issue 60.2: under odi.variant=paper a tied (model, item) group and a trial without an answer are dropped,
    and the print says how many; odi.modal_rule=break_ties keeps ours one setting away."""
    run = run_from_config(config(f"input={run_folder}", "odi.variant=paper"))
    assert run.modal_rule == "drop_ties"
    assert run_from_config(config(f"input={run_folder}", "odi.variant=paper", "odi.modal_rule=break_ties")
                           ).modal_rule == "break_ties"
    assert run_from_config(config(f"input={run_folder}", "odi.modal_rule=drop_ties")).modal_rule == "drop_ties"
    run_odi(run_from_config(config(f"input={run_folder}", "dry_run=true", "odi.variant=paper", "outcome=modal")))
    modal = json.loads(capsys.readouterr().out)["outcomes"]["modal"]
    assert modal["modal_rule"] == "drop_ties"
    assert modal["trials_read"] == 5 * 16 * 6 == modal["trials_kept"] + modal["dropped_tied_trials"] + \
        modal["dropped_unparsed_trials"] + modal["dropped_no_parsed_answer"]
    assert modal["n_trials"] == modal["trials_kept"]


def test_positional_without_items_is_refused_with_the_fix(run_folder):
    trials_only = run_folder / "trials.jsonl"
    with pytest.raises(ValueError, match="items.jsonl"):
        run_odi(run_from_config(config(f"input={trials_only}", "dry_run=true", "odi.variant=positional")))


@pytest.mark.slow
def test_a_run_writes_every_table_and_figure(run_folder, tmp_path, monkeypatch):
    nutpie = pytest.importorskip("nutpie")
    compiles = []
    compile_pymc_model = nutpie.compile_pymc_model
    monkeypatch.setattr(nutpie, "compile_pymc_model", lambda *a, **k: compiles.append(1) or compile_pymc_model(*a, **k))
    out = run_odi(run_from_config(config(f"input={run_folder}", f"out={tmp_path / 'odi'}", "odi=smoke",
                                         "odi.variant=positional", "save_idata=true")))
    assert len(compiles) == 1  # issue 64.5: the second outcome sampled through the first's compile, its own data
    for outcome in ("modal", "correct"):
        folder = out / outcome
        for name in ("item_params.csv", "theta.csv", "decomposition.csv", "posterior_intervals.csv",
                     "signed_delta.csv", "diagnostics.csv", "fit_summary.json", "figures/theta.png",
                     "figures/decomposition.png", "posterior.nc"):
            assert (folder / name).is_file(), name
        decomposition = pd.read_csv(folder / "decomposition.csv")
        assert set(decomposition["facet"]) == {"option_order", "evidence_chunk_order"}
        assert (decomposition["abs_delta_lo"] <= decomposition["mean_abs_delta"]).all()
        assert (decomposition["mean_abs_delta"] <= decomposition["abs_delta_hi"]).all()
        assert "delta_abs_mean" not in decomposition  # the reference's |E delta| is the paper variant's
        intervals = pd.read_csv(folder / "posterior_intervals.csv")
        assert (intervals["sigma_pi_draw_median_lo"] <= intervals["sigma_pi_draw_median"]).all()
        assert (intervals["sigma_pi_draw_median"] <= intervals["sigma_pi_draw_median_hi"]).all()
        assert "sigma_delta_median" not in intervals  # the positional variant has no sigma_delta
        assert len(pd.read_csv(folder / "item_params.csv")) == 16
        assert set(pd.read_csv(folder / "theta.csv")["model"]) == {f"m{j:02d}" for j in range(5)}
    flip = pd.read_csv(out / "capability_flip.csv").set_index("capability")
    assert set(flip.index) == {"accuracy", "theta_correct"}
    assert (flip["rho_lo"] <= flip["rho_hi"]).all()
    assert set(flip["flip_source"]) == {"exact_match"}  # issue 39.3: which flips ODI read, and which correctness
    status = json.loads((out / "odi_status.json").read_text())
    assert (status["flip_source"], status["correct_source"]) == ("exact_match", "exact_match")
    assert status["outcome_data"]["modal"]["modal_rule"] == "break_ties"  # what each outcome kept and dropped
    assert status["outcome_data"]["correct"]["dropped_unscored"] == 0


@pytest.mark.slow
def test_the_default_is_the_identified_positional_variant_and_outputs_say_which_was_fitted(run_folder, tmp_path,
                                                                                          capsys, caplog):
    """Issue 30, point 2: the default variant's |delta| means what the report says; every output names the
    variant and what its |delta| can and cannot show."""
    run = run_from_config(config(f"input={run_folder}"))
    assert run.variant == "positional"
    assert run_from_config(config(f"input={run_folder}", "odi.variant=paper")).variant == "paper"  # reproduction
    with pytest.raises(ValueError, match="paper, positional|positional, paper"):
        run_from_config(config(f"input={run_folder}", "odi.variant=ordinal"))
    run_odi(run_from_config(config(f"input={run_folder}", "dry_run=true")))
    printed = json.loads(capsys.readouterr().out)
    assert printed["variant"] == "positional" and "position bias" in printed["abs_delta"]["shows"]
    with caplog.at_level("INFO", logger="facet_probe.odi"):
        out = run_odi(run_from_config(config(f"input={run_folder}", f"out={tmp_path / 'odi'}", "odi=smoke",
                                             "outcome=modal", "odi.variant=paper")))
    fitted = json.loads((out / "modal" / "fit_summary.json").read_text())
    assert fitted["variant"] == "paper" and "prior alone" in fitted["abs_delta"]["cannot_show"]
    assert fitted["scales"] == "conditional" and fitted["conditional_centring"] is True
    decomposition = pd.read_csv(out / "modal" / "decomposition.csv")
    assert set(decomposition["variant"]) == {"paper"} and set(decomposition["modal_rule"]) == {"drop_ties"}
    assert decomposition["delta_abs_mean"].notna().all()  # issue 60.1: the reference's |E delta|, paper variant
    intervals = pd.read_csv(out / "modal" / "posterior_intervals.csv")  # issue 60.3, with sigma_delta here
    for point in ("sigma_pi_draw_median", "sigma_delta_median"):
        assert ((intervals[f"{point}_lo"] <= intervals[point]) & (intervals[point] <= intervals[f"{point}_hi"])).all()
    status = json.loads((out / "odi_status.json").read_text())
    assert status["variant"] == "paper" and status["outcome_data"]["modal"]["modal_rule"] == "drop_ties"
    assert fitted["outcome_data"] == status["outcome_data"]["modal"]
    assert "modal (drop_ties): " in caplog.text and "tied (model, item) groups dropped" in caplog.text


def test_the_apps_log_leaves_out_the_libraries_info_notes_and_keeps_their_warnings(capsys):
    """arviz's "arviz_stats not installed" and JAX's "Unable to initialize backend 'tpu'" (INFO, on import and on
    JAX's start) are not the run's; a library's warning still reaches the log."""
    import logging.config

    from omegaconf import OmegaConf

    cfg = config("input=x", with_hydra=True)
    saved = {name: logging.getLogger(name).level for name in ("", "arviz", "jax._src.xla_bridge")}
    root_handlers = logging.getLogger().handlers[:]
    try:
        logging.config.dictConfig(OmegaConf.to_container(cfg.hydra.job_logging, resolve=True))
        logging.getLogger("arviz.preview").info("arviz_stats not installed")
        logging.getLogger("jax._src.xla_bridge").info("Unable to initialize backend 'tpu'")
        logging.getLogger("arviz").warning("a library's warning")
        logging.getLogger("facet_probe").info("the run's own note")
        out = capsys.readouterr().out
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        logging.getLogger().handlers[:] = root_handlers  # the app's console handler wrote to this test's capture
    assert "not installed" not in out and "tpu" not in out
    assert "a library's warning" in out and "the run's own note" in out
