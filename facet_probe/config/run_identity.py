"""One run folder, one set of settings: what changes the calls or the sample is recorded on the first run
and checked on every later one, so a folder is never silently rewritten for other settings or items.

The settings are the resolved config less the keys marked INERT in `facet_probe.config.schema` (where to write,
progress bars, bootstrap draws, shards), recorded in the folder's `run_identity.json` (`store.run_folder`). Folders
written before this record existed are checked against their `config.yaml`. The manifest is checked too: the same settings over changed data (a dataset file
edited in place) would otherwise replace the run's record of what was asked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from facet_probe.config.schema import INERT, audit_keys
from facet_probe.core.errors import ConfigError
from facet_probe.core.redact import redact_value
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.run_folder import RunFolder

#: Columns that identify a manifest row's ordering (what the model is asked).
MANIFEST_KEYS = ["facet", "dataset", "item_id", "ordering_idx", "repeat_idx", "permutation", "seed", "k"]


def run_settings(cfg: DictConfig | dict) -> dict[str, Any]:
    """The settings that make a run what it is, as plain data, flattened to dotted keys (secrets redacted)."""
    container = cfg if isinstance(cfg, dict) else OmegaConf.to_container(cfg, resolve=True)
    inert = audit_keys(INERT)
    flat = {k: v for k, v in _flatten(redact_value(container)).items()
            if not any(k == s or k.startswith(s + ".") for s in inert)}
    flat.pop("hydra", None)
    return flat


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out |= _flatten(value, f"{prefix}{key}.")
        return out or {prefix[:-1]: {}}
    return {prefix[:-1]: node}


def recorded_settings(run_dir: Path) -> dict[str, Any] | None:
    """The settings a folder was made with: its identity record, else (older folders) its config.yaml."""
    folder = RunFolder(run_dir)
    settings = folder.identity()
    if settings is not None:
        return settings
    config = folder.config()
    return None if config is None else run_settings(cast(dict, OmegaConf.to_container(config, resolve=False)))


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """'key: old -> new' for settings both sides have and set differently (a key one side lacks is a
    setting added or removed by a code change, whose default is what the other side ran with)."""
    return [f"{k}: {old[k]!r} -> {new[k]!r}" for k in sorted(old.keys() & new.keys()) if old[k] != new[k]]


def check_settings(run_dir: Path, settings: dict[str, Any]) -> None:
    """Refuse a command whose settings differ from those the folder holds (before anything is written)."""
    old = recorded_settings(run_dir)
    if old is None:
        return
    diff = differences(old, settings)
    if diff:
        shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise ConfigError(
            f"run folder {run_dir} holds a run of other settings ({shown}). A run folder holds one set of "
            "settings: leave hydra.run.dir unset to get a folder named for these settings, or choose a new "
            "folder (hydra.run.dir=<path>)")


def check_manifest(run_dir: Path, manifest: pd.DataFrame) -> None:
    """Refuse a manifest (items x orderings) other than the one the folder was drawn for."""
    recorded = RunFolder(run_dir).manifest(MANIFEST_KEYS)
    if recorded is None:
        return
    old = _rows(recorded)
    new = _rows(manifest)
    if old == new:
        return
    items_old = {r[2] for r in old}
    items_new = {r[2] for r in new}
    what = (f"{len(items_new - items_old)} items added, {len(items_old - items_new)} removed"
            if items_old != items_new else "the same items with other orderings")
    raise ConfigError(
        f"run folder {run_dir} was drawn for {len(items_old)} items and {len(old)} manifest rows; this command "
        f"makes {len(items_new)} items and {len(new)} rows ({what}: has the dataset changed?). A run folder "
        "keeps the record of what was asked: use a new folder (hydra.run.dir=<path>) for the new items")


def _rows(frame: pd.DataFrame) -> set[tuple]:
    frame = frame[MANIFEST_KEYS].copy()
    frame["permutation"] = frame["permutation"].map(lambda p: tuple(int(x) for x in p))
    return set(frame.itertuples(index=False, name=None))


def record_settings(run_dir: Path, settings: dict[str, Any]) -> None:
    """Write the folder's identity record (once it has been checked)."""
    atomic_write_text(RunFolder(run_dir).identity_file,
                      json.dumps({"settings": settings}, indent=2, sort_keys=True, default=str))
