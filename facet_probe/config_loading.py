"""Load a config group option by name (for experiments naming several models/datasets/facets).

Uses Hydra's compose API on the package's own config folder, so group defaults lists work and
configs are found when facet_probe is installed as a package.
"""

from __future__ import annotations

from contextlib import nullcontext
from importlib.resources import files

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from facet_probe.config import register

CONFIG_MODULE = "facet_probe.conf"


class ConfigError(ValueError):
    """A config names something that does not exist or cannot work together; says what is valid."""


def available(group: str) -> list[str]:
    """Names of the options of a config group (yaml files not starting with '_')."""
    folder = files(CONFIG_MODULE).joinpath(group)
    if not folder.is_dir():
        return []
    return sorted(p.name[:-5] for p in folder.iterdir()
                  if p.name.endswith(".yaml") and not p.name.startswith("_"))


def check_name(group: str, name: str) -> None:
    valid = available(group)
    if name not in valid:
        raise ConfigError(f"unknown {group} {name!r}; valid {group} names: {', '.join(valid)}")


def load_option(group: str, name: str) -> DictConfig:
    """The composed config node of `<group>/<name>.yaml`."""
    check_name(group, name)
    register()
    ctx = (nullcontext() if GlobalHydra.instance().is_initialized()
           else initialize_config_module(CONFIG_MODULE, version_base="1.3"))
    with ctx:
        return compose(f"{group}/{name}")[group]
