"""`run_audit(cfg, out_dir)`: the audit of a composed config with no Hydra runtime (no `HydraConfig`, no callbacks),
from Python as from the command line, and the Python API running it so."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig

from facet_probe import api
from facet_probe.app import audit_job
from facet_probe.app.audit_job import Invocation, run_audit
from facet_probe.config import loading
from facet_probe.config.schema import register
from facet_probe.core.errors import ConfigError

CELL = ["model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=2", "k=2", "progress=false",
        "bootstrap=10"]


def composed(*overrides: str, with_hydra: bool = True):
    """The audit's config composed with Hydra's public compose API, as a notebook would."""
    register()
    with initialize_config_module(loading.CONFIG_MODULE, version_base="1.3", job_name="config"):
        return compose("config", overrides=list(overrides), return_hydra_config=with_hydra)


def test_run_audit_runs_a_composed_config_with_no_hydra_runtime(tmp_path):
    """`audit_job.run` read the run folder and the command line's choices from `HydraConfig.get()`: called with a
    composed config it stopped with "HydraConfig was not set"."""
    cfg = composed(*CELL)
    assert not HydraConfig.initialized()
    run_dir = run_audit(cfg, tmp_path / "run")
    assert run_dir == tmp_path / "run" and not HydraConfig.initialized()
    assert (run_dir / "summary.csv").is_file() and len((run_dir / "trials.jsonl").read_text().splitlines()) == 4
    assert "hydra" not in (run_dir / "config.yaml").read_text()  # the audit's own settings, not Hydra's
    assert not (run_dir / ".hydra").exists()  # Hydra's record of an invocation is the command line's (and the API's)


def test_without_its_hydra_node_the_config_takes_the_choices_given_or_is_refused_in_one_line(tmp_path):
    cfg = composed(*CELL, "prepare_only=true", with_hydra=False)
    with pytest.raises(ConfigError, match="^run_audit: the config has no hydra node .* return_hydra_config=True"):
        run_audit(cfg, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    chosen = Invocation({"facet": "option_order", "dataset": "synthetic_mcq"})  # the model: its config's name
    run_dir = run_audit(cfg, tmp_path / "run", chosen)
    assert (run_dir / "manifest.parquet").is_file() and not (run_dir / "trials.jsonl").exists()


def test_the_python_api_runs_the_audit_with_no_hydra_runtime(tmp_path, monkeypatch):
    """`facet_probe.run_audit([...])` ran the audit inside Hydra's job runner (private `hydra._internal`
    callbacks, `HydraConfig` set): now `run_audit` of the composed config, the command line's choices, run folder
    and user config folders taken from the config, Hydra's `.hydra/` record written as on the command line."""
    seen = {}

    def audit_into(cfg, run_dir, invocation):
        seen.update(runtime=HydraConfig.initialized(), hydra_node="hydra" in cfg, run_dir=run_dir,
                    invocation=invocation, search_path=loading.search_path_overrides())
        return run_dir

    monkeypatch.setattr(audit_job, "audit_into", audit_into)
    user_conf = tmp_path / "conf"
    user_conf.mkdir()
    result = api.audit([*CELL, f"out_root={tmp_path / 'out'}", f"hydra.searchpath=[file://{user_conf}]"])
    assert seen["runtime"] is False and seen["hydra_node"] is False
    assert result.run_dir == seen["run_dir"] and seen["run_dir"].is_relative_to(tmp_path / "out")
    assert seen["invocation"].choices["model"] == "oracle" and "limit=2" in seen["invocation"].overrides
    assert seen["search_path"] == [f"hydra.searchpath=['file://{user_conf}']"]
    assert (result.run_dir / ".hydra" / "overrides.yaml").is_file()
    assert loading.search_path_overrides() == [] and not HydraConfig.initialized()


def test_a_setting_the_audit_refuses_is_the_command_line_s_line_from_python(tmp_path):
    """Refused inside the job (after Hydra composed the config): the command line's one line, as a ConfigError."""
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        api.audit(["model=oracle", "limit=2", "experiment.models=[oracle,nope]", f"out_root={tmp_path}"])


def test_the_run_folder_default_is_where_the_command_line_writes(tmp_path):
    cfg = composed(*CELL, "prepare_only=true", f"out_root={tmp_path}")
    run_dir = run_audit(cfg)
    assert run_dir == Path(str(cfg.hydra.run.dir)).absolute() and run_dir.is_relative_to(tmp_path)
