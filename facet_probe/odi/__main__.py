"""Hydra entry: python -m facet_probe.odi input=<run folder(s) | trials file> outcome=<modal|correct|both>."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from facet_probe.odi.fit import FitSettings, resolve_backend
from facet_probe.odi.model import Priors
from facet_probe.odi.pipeline import OdiRun, parse_outcome, run_odi


def run_from_config(cfg: DictConfig) -> OdiRun:
    """The typed run description from the composed config (unknown `odi.priors` keys fail)."""
    o = cfg.odi
    inputs = [str(p) for p in cfg.input] if isinstance(cfg.input, ListConfig) else [str(cfg.input)]
    settings = FitSettings(sampler=o.sampler, draws=o.draws, tune=o.tune, chains=o.chains, cores=o.cores,
                           seed=o.seed, target_accept=o.target_accept,
                           nutpie_backend=resolve_backend(o.nutpie_backend),
                           advi_iterations=o.advi_iterations, progress=o.progress)
    return OdiRun(inputs=inputs, outcomes=parse_outcome(cfg.outcome), variant=o.variant, fit=settings,
                  priors=Priors(**OmegaConf.to_container(o.priors)), out=Path(cfg.out) if cfg.out else None,
                  dry_run=cfg.dry_run, save_idata=cfg.save_idata,
                  facets=list(o.facets) if o.facets else None, items=o["items"], float32=o.float32,
                  bootstrap=o.bootstrap)


@hydra.main(config_path="../conf", config_name="odi_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.getLogger("facet_probe").setLevel(logging.INFO)
    run_odi(run_from_config(cfg))


if __name__ == "__main__":
    main()
