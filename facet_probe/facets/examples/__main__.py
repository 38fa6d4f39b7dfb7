"""`python -m facet_probe.facets.examples [FACET ...] [--cot] [--perm 2,0,1]`: the facet preview as a Hydra app,
so a facet of a user folder or plug-in package previews exactly like a built-in one."""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from facet_probe.api import App, run
from facet_probe.app.boundary import main_entry, run_app
from facet_probe.facets.examples import APP, TASK, hydra_argv, show


def main(argv: list[str] | None = None) -> None:
    """The tool in-process (`argv` as on its command line, default `sys.argv[1:]`): the command line's config
    and output; a bad facet, mode or override raises ConfigError with the line the command line prints."""
    run(App(APP, TASK), hydra_argv(sys.argv[1:] if argv is None else argv))


@hydra.main(config_path="../../conf", config_name=APP, version_base="1.3")
def app(cfg: DictConfig) -> None:
    run_app(lambda: show(cfg), logging.getLogger("facet_probe"), announce=False)


def cli() -> None:
    """The command line: one line and exit 2 for a bad facet, mode or override (docs/bad_input.md)."""
    sys.argv = [sys.argv[0], *hydra_argv(sys.argv[1:])]
    main_entry(app)


if __name__ == "__main__":
    cli()
