"""A dataset's config node as an app uses it: the chosen or named config, a panel's settings, the data root.

Shared by the audit (several datasets per panel) and the attack (one dataset), so neither app imports the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from facet_probe.config.loading import load_option


def dataset_config(cfg: DictConfig, name: str, dataset_choice: str | None) -> DictConfig:
    """The chosen `dataset` node (with the user's overrides) or the named config, with the experiment's
    `dataset_settings` (e.g. `sampling: reference` for every dataset of a panel), path from data_root."""
    node = cfg.dataset if dataset_choice == name else load_option("dataset", name)
    panel = cfg.get("experiment") or {}  # apps without panels (the attack) have no experiment
    node = cast(DictConfig, OmegaConf.merge(node, panel.get("dataset_settings") or {}))  # a private copy, + the panel's
    if node.get("path") is None and cfg.get("data_root"):
        folder = getattr(get_class(node._target_), "data_folder", None) or name
        node.path = str(Path(cfg.data_root).expanduser() / folder)
    return node
