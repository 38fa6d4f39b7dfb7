"""Which family adapter runs a checkpoint, read from the `model_type` of its config.json (`model=hf`).

`model=hf model.model_id=<hub id or folder>` (conf/model/hf.yaml) names no adapter: its `_target_` is the adapter
whose `model_types` hold the checkpoint's `model_type`, with that adapter's defaults. The families are the adapters
that the model configs name (the `_target_` of conf/model/*.yaml under this package), each declaring the
`model_types` it runs: a new family is its adapter and a config, and no list of families is kept anywhere else.
Light to import (the adapters are imported when a checkpoint is looked up); importing it registers hf.yaml's
resolvers, and `facet_probe.runners` imports it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from facet_probe.runners.hf.base import HFRunner

#: the model config that reads its family from the checkpoint (`model=hf model.model_id=...`)
BY_CHECKPOINT = "hf"


def checkpoint_folder(model_id: str) -> str | None:
    """`model_id` as a local folder when it is one (`~` expanded), None when it is a hub id (`owner/name`); one
    `ConfigError` when it is neither (a path that is not there)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    from facet_probe.core.errors import ConfigError

    folder = Path(str(model_id)).expanduser()
    if folder.is_dir():
        return str(folder)
    try:
        validate_repo_id(str(model_id))
    except HFValidationError:
        raise ConfigError(f"model.model_id={model_id}: no such folder, and not a Hugging Face hub id (owner/name); "
                          "give a checkpoint folder (save_pretrained or a hub snapshot) or a hub id") from None
    return None


def family_adapters() -> dict[str, type[HFRunner]]:
    """model_type -> the adapter that runs it, from the adapters the model configs name (their `model_types`,
    each declared on the adapter's own class: a subclass such as MiniGPT-4's runs only under its own config)."""
    from hydra.utils import get_class

    from facet_probe.config.loading import option_targets

    package = __name__.rpartition(".")[0]
    adapters: dict[str, type[HFRunner]] = {}
    for target in sorted(set(option_targets("model").values())):
        if target.startswith(f"{package}."):
            cls = cast("type[HFRunner]", get_class(target))  # the model configs under this package name adapters
            for model_type in vars(cls).get("model_types", ()):
                adapters.setdefault(model_type, cls)
    return adapters


def supported_line(adapters: dict[str, type[HFRunner]]) -> str:
    """'blip2: blip-2, instructblip; gemma3: gemma3; ...': the model types each family runs."""
    by_family: dict[str, list[str]] = defaultdict(list)
    for model_type, cls in adapters.items():
        by_family[cls.family].append(model_type)
    return "; ".join(f"{family}: {', '.join(sorted(types))}" for family, types in sorted(by_family.items()))


def checkpoint_config(name: str, model_id: str, revision: str | None, local_path: str | None) -> dict[str, Any]:
    """The checkpoint's `config.json`: from `local_path`, else from the hub snapshot at `revision` (the local
    Hugging Face cache; fetched unless HF_HUB_OFFLINE is set; only this file). Not there: one user error saying
    what to do (the `hf download` command for a hub id)."""
    from facet_probe.core.errors import ConfigError
    from facet_probe.runners.base import RunnerError
    from facet_probe.runners.hf.checkpoint import hub_snapshot, not_in_cache_message

    folder = Path(local_path).expanduser() if local_path else hub_snapshot(name, model_id, revision, ["config.json"])
    path = folder / "config.json"
    if not path.is_file():
        if local_path:
            raise ConfigError(f"{name}: {folder} has no config.json (expected a save_pretrained folder or a hub "
                              "snapshot)")
        raise RunnerError(not_in_cache_message(name, model_id, revision, FileNotFoundError(str(path))))
    try:
        config = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); the checkpoint's config.json is damaged") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: not a JSON object; the checkpoint's config.json is damaged")
    return config


def family_target(model_id: str, revision: str | None, local_path: str | None, name: str = BY_CHECKPOINT) -> str:
    """The `_target_` (dotted class path) of the family adapter that runs the checkpoint; an unknown family is
    one `ConfigError` listing the model types each family runs."""
    from facet_probe.core.errors import ConfigError

    config = checkpoint_config(name, model_id, revision, local_path)
    model_type = config.get("model_type")
    adapters = family_adapters()
    if model_type not in adapters:
        where = local_path or f"{model_id}@{revision or 'main'}"
        architectures = ", ".join(config.get("architectures") or []) or "none named"
        raise ConfigError(f"{name}: {where} is a {model_type!r} checkpoint (architectures: {architectures}), which "
                          f"no family adapter runs; model=hf runs these model types: {supported_line(adapters)} "
                          "(a new family: docs/plugins.md, 'A model family')")
    cls = adapters[model_type]
    return f"{cls.__module__}.{cls.__qualname__}"


def register_resolvers() -> None:
    """The resolvers conf/model/hf.yaml reads: `fp_hf_family` (its `_target_`) and `fp_checkpoint_folder` (its
    `local_path`). Idempotent; run when this module is imported, which `facet_probe.runners` does."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("fp_hf_family"):
        OmegaConf.register_new_resolver("fp_hf_family", family_target)
    if not OmegaConf.has_resolver("fp_checkpoint_folder"):
        OmegaConf.register_new_resolver("fp_checkpoint_folder", checkpoint_folder)


register_resolvers()
