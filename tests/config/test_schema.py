"""Every config composes; cheap targets instantiate; bad names and keys fail with clear messages."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from facet_probe.config.loading import ConfigError, available, load_option
from facet_probe.config.schema import check_run_settings, register, run_name
from facet_probe.datasets.base import DatasetLoader
from facet_probe.facets.base import Facet

register()
GROUPS = ("model", "facet", "dataset", "judge", "experiment")


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_every_option_of_every_group_composes_with_the_root_config(hydra_ctx, group):
    names = available(group)
    assert names, f"no {group} configs"
    for name in names:
        cfg = compose("config", overrides=[f"{group}={name}"])
        assert cfg.k == 6 and cfg.seed == 42


def test_every_facet_config_instantiates_the_facet_of_its_name(hydra_ctx):
    for name in available("facet"):
        facet = instantiate(load_option("facet", name))
        assert isinstance(facet, Facet) and facet.name == name
        assert facet.datasets, f"facet {name} names no datasets"


def test_every_dataset_a_facet_names_has_a_config(hydra_ctx):
    datasets = set(available("dataset"))
    for name in available("facet"):
        missing = set(load_option("facet", name).datasets) - datasets
        assert not missing, f"facet {name} names datasets without configs: {missing}"


def test_synthetic_dataset_configs_instantiate_loaders(hydra_ctx):
    synthetic = [n for n in available("dataset") if n.startswith("synthetic_")]
    assert len(synthetic) == 9
    for name in synthetic:
        loader = instantiate(load_option("dataset", name))
        assert isinstance(loader, DatasetLoader) and loader.name == name


def test_unknown_top_level_key_is_rejected(hydra_ctx):
    with pytest.raises(ConfigCompositionException, match="kk"):
        compose("config", overrides=["kk=3"])


def test_unknown_option_name_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="valid model names: .*oracle"):
        load_option("model", "no_such_model")


def test_run_name_is_readable_and_separates_what_changes_the_trials():
    base = run_name("tiny_vlm", None, None, "offline", False, 6, 42, 1)
    assert base == "tiny_vlm/offline/direct-k6-seed42"
    assert run_name("m", "facet_probe.facets.option_order.OptionOrder", "mmlu_pro", "offline", True, 6, 42, 3) \
        == "m/option_order-mmlu_pro/cot-k6-seed42-r3"
    assert run_name("tiny_vlm", None, None, "offline", False, 6, 43, 1) != base


@pytest.mark.parametrize(("override", "message"), [
    ("seed=-1", r"seed=-1: need 0 <= seed < 2\*\*63 .*e\.g\. seed=42 \(the default\)"),
    (f"seed={2**64 + 1}", rf"seed={2**64 + 1}: need 0 <= seed < 2\*\*63"),
    ("bootstrap_seed=-3", r"bootstrap_seed=-3: need 0 <= bootstrap_seed < 2\*\*63 .*bootstrap_seed=0 \(the default\)"),
    ("k=1000000000000", r"k=1,000,000,000,000 x repeats=1 = 1,000,000,000,000 manifest rows per item: a run "
                        r"folder's manifest holds at most 1,000,000"),
    ("repeats=2000000", r"k=6 x repeats=2,000,000 = 12,000,000 manifest rows per item"),
])
def test_seeds_and_k_no_run_can_use_are_refused_before_any_work(hydra_ctx, override, message):
    """seed=-1 had every trial called before the report failed; seed > 2**64 failed writing the manifest;
    k=10**12 drew orderings for minutes without a word."""
    cfg = compose("config", overrides=[override])
    with pytest.raises(ConfigError, match=message):
        check_run_settings(cfg)
    check_run_settings(compose("config", overrides=["seed=0", f"seed={2**63 - 1}", "k=1000000"]))
