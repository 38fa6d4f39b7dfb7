"""Hydra entry: python -m facet_probe.odi input=<run folder(s) | folder of run folders | trials file>
outcome=<modal|correct|both>. A folder of run folders (e.g. outputs/<model>) stands for every run folder in it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, ListConfig

import facet_probe.config.loading  # noqa: F401  (registers fp_app_groups, which --help reads)
from facet_probe.app.boundary import main_entry, run_app
from facet_probe.config.schema import check_counts, check_seeds
from facet_probe.core.errors import ConfigError, TrialsFileError
from facet_probe.core.extras import check_extra
from facet_probe.store.run_folder import run_inputs

if TYPE_CHECKING:
    from facet_probe.odi.pipeline import OdiRun

#: Who needs the [odi] extra, in its message (the modules below import PyMC, ArviZ and JAX, so they are
#: imported after `check_extra` has said what is missing, once, before any work).
APP = "python -m facet_probe.odi"


def run_from_config(cfg: DictConfig) -> OdiRun:
    """The typed run description from the composed config (unknown `odi.priors` keys fail)."""
    from facet_probe.odi.fit import FitSettings, resolve_backend
    from facet_probe.odi.kernel import parse_kernel
    from facet_probe.odi.model import Priors, parse_scales, parse_variant
    from facet_probe.odi.outcome import modal_rule_for
    from facet_probe.odi.pipeline import OdiRun, default_out, parse_outcome

    o = cfg.odi
    given = [str(p) for p in cfg.input] if isinstance(cfg.input, ListConfig) else [str(cfg.input)]
    inputs = [str(p) for p in run_inputs(given)]
    out = cfg.out or default_out(given, str(o.variant))  # a folder of run folders: its own odi/<variant>
    settings = FitSettings(sampler=o.sampler, draws=o.draws, tune=o.tune, chains=o.chains, cores=o.cores,
                           seed=o.seed, target_accept=o.target_accept,
                           nutpie_backend=resolve_backend(o.nutpie_backend),
                           advi_iterations=o.advi_iterations, progress=o.progress and cfg.progress,
                           mass_matrix=o.mass_matrix, pytensor_mode=o.pytensor_mode, smoke=o.smoke)
    variant = parse_variant(o.variant)
    return OdiRun(inputs=inputs, outcomes=parse_outcome(cfg.outcome), variant=variant, fit=settings,
                  priors=Priors(**o.priors), out=Path(out) if out else None,
                  dry_run=cfg.dry_run, save_idata=cfg.save_idata,
                  facets=list(o.facets) if o.facets else None, items=o["items"], float32=o.float32,
                  kernel=parse_kernel(o.kernel), scales=parse_scales(o.scales),
                  bootstrap=o.bootstrap, modal_rule=modal_rule_for(variant, o.modal_rule))


def odi_app(cfg: DictConfig) -> Path | None:
    """Run ODI; a check of facet_probe's own that refuses the input or a setting is a user error."""
    check_extra("odi", APP)  # PyMC, ArviZ, nutpie, JAX: one line naming what is missing, before any work
    from facet_probe.odi.fit import FitSettings
    from facet_probe.odi.pipeline import OdiRun, run_odi

    check_counts(cfg, {"odi.bootstrap": OdiRun.bootstrap})  # odi.bootstrap=0, nan: one line, before any input is read
    check_seeds(cfg, {"odi.seed": FitSettings.seed})
    try:
        return run_odi(run_from_config(cfg))
    except TrialsFileError:  # a damaged trials file or run folder record: the line every app gives
        raise
    except (TypeError, ValueError) as exc:
        if not raised_by_facet_probe(exc):
            raise
        raise ConfigError(f"odi: {exc}") from None


def raised_by_facet_probe(exc: BaseException) -> bool:
    """Was the exception raised by facet_probe's own code (a check), not inside a library (a crash)?"""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    package = Path(__file__).resolve().parents[1]
    return tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(package)


@hydra.main(config_path="../conf", config_name="odi_app", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.getLogger("facet_probe").setLevel(logging.INFO)
    run_app(lambda: odi_app(cfg), logging.getLogger("facet_probe.odi"), announce=False)


def cli() -> None:
    """The command line (`python -m facet_probe.odi`, the `facet-probe-odi` script)."""
    main_entry(main)


if __name__ == "__main__":
    cli()
