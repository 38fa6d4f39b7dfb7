"""Each dataset config declares its loader: Hydra instantiates it with the config's own keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from facet_probe.config.loading import load_option
from facet_probe.datasets.hub import UpstreamLoader
from facet_probe.datasets.reference_sampling import Sampling

CONF = Path(__file__).resolve().parents[2] / "facet_probe" / "conf"
NAMES = [
    "mmlu_pro",
    "commonsense_qa",
    "mathvision",
    "hotpotqa",
    "hotpotqa_docs",
    "musique",
    "medxpertqa",
    "multihop_rag",
    "mantis_eval",
    "medframeqa",
    "mramg",
    "mmdocrag",
    "mmqa",
    "scienceqa",
    "aokvqa",
    "imagenet4",
    "imagenet8",
    "imagenet16",
]
PAPER_N = {
    "mmlu_pro": 200,
    "commonsense_qa": 200,
    "mathvision": 190,
    "hotpotqa": 199,
    "hotpotqa_docs": 199,
    "musique": 200,
    "medxpertqa": 150,
    "multihop_rag": 171,
    "mantis_eval": 70,
    "medframeqa": 200,
    "mramg": 197,
    "mmdocrag": 200,
    "mmqa": 200,
}


@pytest.mark.parametrize("name", NAMES)
def test_the_config_instantiates_its_loader_without_touching_data(name):
    cfg = load_option("dataset", name)
    loader = instantiate(cfg)
    assert isinstance(loader, UpstreamLoader) and loader.name == name == cfg.name
    assert loader.seed == 42 and loader.n == PAPER_N.get(name) and loader.path is None
    assert loader.source and loader.license and loader.facets


@pytest.mark.parametrize("facet_file", sorted((CONF / "facet").glob("*.yaml")))
def test_every_paper_dataset_of_a_facet_declares_that_facet(facet_file):
    facet = OmegaConf.load(facet_file)
    name = facet_file.stem
    for dataset in [d for d in facet.datasets if d in NAMES]:
        loader = instantiate(load_option("dataset", dataset))
        assert name in loader.facets, f"{dataset} is audited under {name} but declares {loader.facets}"


@pytest.mark.parametrize("path", sorted(p for p in (CONF / "dataset").glob("*.yaml") if not p.name.startswith("_")))
def test_every_dataset_config_pulls_in_the_shared_base(path):
    """`dataset.sampling=...` and `dataset.allow_partial=...` are keys of every dataset config (no `+`)."""
    cfg = load_option("dataset", path.stem)
    assert cfg.sampling == "stable" and cfg.allow_partial is False
    if path.stem == "items_jsonl" or OmegaConf.missing_keys(cfg):  # needs its items file, or keys left to the user
        return
    loader = instantiate(cfg, sampling="stable", allow_partial=True)
    assert loader.sampling is Sampling.STABLE and loader.allow_partial


@pytest.mark.parametrize("name", sorted(PAPER_N))
def test_every_paper_dataset_has_the_reference_runners_selection(name):
    loader = instantiate(load_option("dataset", name), sampling="reference")
    assert loader.sampling is Sampling.REFERENCE and loader.reference.default_target == (
        {"mantis_eval": 18, "medframeqa": 195}.get(name, PAPER_N[name]))  # the reference's own defaults
