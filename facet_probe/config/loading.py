"""Load a config group option by name (for experiments naming several models/datasets/facets).

Uses Hydra's own config loader: inside a running app the app's search path, with the user's
`hydra.searchpath` folders (its caller passes them: `searching`), so an experiment can name a config from a
user folder exactly as the command line can; outside an app, the package's own config folder (installed or not).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import textwrap
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from facet_probe.config.schema import register
from facet_probe.core.errors import ConfigError, parse_enum  # noqa: F401 (imported from here too)

CONFIG_MODULE = "facet_probe.conf"


#: The user's config folders (`hydra.searchpath`) of the app running now, set by its caller (`searching`): Hydra
#: applies that key only while composing the primary config, so each later look-up passes it again. Plain module
#: state, not a context variable: a run's worker threads look configs up too.
_search_path: tuple[str, ...] = ()


@contextmanager
def searching(paths: Iterable[str] | None) -> Iterator[None]:
    """Look configs up in these user folders too (the entries of an app's `hydra.searchpath`) while the block
    runs: the command line's error boundary passes Hydra's, the Python API the composed config's."""
    global _search_path
    before, _search_path = _search_path, tuple(str(p) for p in paths or ())
    try:
        yield
    finally:
        _search_path = before


def search_path_overrides() -> list[str]:
    """The running app's `hydra.searchpath` as an override ([] outside an app or without one; `searching`)."""
    paths = list(_search_path)
    if not paths:
        return []
    quoted = ",".join("'" + str(p).replace("\\", "\\\\").replace("'", "\\'") + "'" for p in paths)
    return [f"hydra.searchpath=[{quoted}]"]


@contextmanager
def _hydra() -> Iterator[GlobalHydra]:
    """The running app's Hydra, or one initialised on the package's config folder for the call."""
    register()
    if GlobalHydra.instance().is_initialized():
        yield GlobalHydra.instance()
        return
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        yield GlobalHydra.instance()


#: Composed options and group listings of this process, keyed by what they were composed from (`_cache_key`):
#: an experiment or a report names the same configs again and again, and one Hydra compose costs about 0.15 s.
_COMPOSED: dict[tuple, DictConfig | list[str] | dict[str, str]] = {}
_COMPOSED_MAX = 512  # the oldest go first past this (a long test session signs many user folders)


def _folder_signature(entry: str) -> tuple:
    """What a search-path entry holds, so an edited or another folder of configs is composed anew: the path, size and
    modification time of every YAML file under a `file://` folder or a plug-in package's config folder (`pkg://`,
    wherever it is imported from now). The package's own configs are read once per process."""
    provider, _, where = entry.partition("://") if "://" in entry else ("file", "", entry)  # a bare path is a folder
    if provider == "file":
        roots = [Path(where)]
    elif provider == "pkg" and where != CONFIG_MODULE and not where.startswith("hydra."):
        try:
            spec = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            spec = None
        roots = [Path(p) for p in (spec.submodule_search_locations or ())] if spec else []
    else:
        return (entry,)
    files = sorted(f for root in roots if root.is_dir() for f in root.rglob("*.y*ml") if f.is_file())
    return (entry, *((str(f), (st := f.stat()).st_size, st.st_mtime_ns) for f in files))


def _cache_key(gh: GlobalHydra, *parts: str) -> tuple:
    """`parts` on this search path: the app's own folders plus the user's `hydra.searchpath`, each signed."""
    app = [str(p.path) for p in gh.config_loader().config_search_path.get_path()]  # type: ignore[attr-defined]  # ConfigLoaderImpl's
    return (*parts, tuple(_folder_signature(e) for e in [*app, *_search_path]))


def _remember(key: tuple, value: DictConfig | list[str] | dict[str, str]) -> None:
    while len(_COMPOSED) >= _COMPOSED_MAX:
        del _COMPOSED[next(iter(_COMPOSED))]
    _COMPOSED[key] = value


def available(group: str) -> list[str]:
    """Names of the options of a config group on the search path (configs whose name starts with '_' are
    bases, not options)."""
    with _hydra() as gh:
        key = _cache_key(gh, "available", group)
        if key not in _COMPOSED:
            names = gh.config_loader().get_group_options(group, overrides=search_path_overrides())
            _remember(key, sorted(n for n in names if not n.rsplit("/", 1)[-1].startswith("_")))
    return list(_COMPOSED[key])


def option_targets(group: str) -> dict[str, str]:
    """option -> the `_target_` its own file names, for the options of `group` that name one as a plain value (not
    composed: read as written, so a `_target_` worked out by an interpolation, or one a defaults list brings in,
    is not among them; 45 model configs in 0.1 s where composing them takes seconds)."""
    with _hydra() as gh:
        key = _cache_key(gh, "targets", group)
        if key not in _COMPOSED:
            repository = gh.config_loader().repository  # type: ignore[attr-defined]  # ConfigLoaderImpl's, not in its interface
            targets = {}
            for name in available(group):
                loaded = repository.load_config(f"{group}/{name}")
                node = loaded.config if loaded is not None else None
                if node is not None and "_target_" in node and not OmegaConf.is_interpolation(node, "_target_"):
                    targets[name] = str(node._get_node("_target_")._value())
            _remember(key, targets)
    return dict(cast(dict[str, str], _COMPOSED[key]))


def check_name(group: str, name: str) -> None:
    valid = available(group)
    if name not in valid:
        raise ConfigError(f"unknown {group} {name!r}; valid {group} names: {', '.join(valid)} (a config folder "
                          "of your own goes on hydra.searchpath=[file:///path/to/conf])")


def load_option(group: str, name: str) -> DictConfig:
    """The composed config node of `<group>/<name>.yaml`, wherever on the search path it lies."""
    check_name(group, name)
    with _hydra() as gh:
        key = _cache_key(gh, "option", group, name)
        if key not in _COMPOSED:
            # appended to an empty primary config: Hydra looks a primary config up before it applies the search path
            _remember(key, compose(overrides=[*search_path_overrides(), f"+{group}={name}"]))
        return copy.deepcopy(cast(DictConfig, _COMPOSED[key]))[group]  # a copy: callers set fields on what they get


#: Where `prefetch` places each option in its one composed config: `<PREFETCHED>.<group>.<name>`.
PREFETCHED = "_fp_prefetched"


def prefetch(wanted: dict[str, list[str]]) -> None:
    """Compose the options a run will `load_option` by name ({group: names}) in one Hydra compose, each at a package
    of its own, instead of one compose each (about 0.05 s apiece on a quiet machine, a panel names tens). What the
    one compose cannot stand for is left to `load_option`, composed alone: an unknown name (its error is
    `load_option`'s), an option that lands elsewhere (its own `@package`) or holds an interpolation (`${...}`
    resolves against the whole config, so its place matters), and all of them if the compose fails."""
    with _hydra() as gh:
        todo = {(group, name) for group, names in wanted.items() for name in names
                if name in available(group) and _cache_key(gh, "option", group, name) not in _COMPOSED}
        if not todo:
            return
        overrides = [f"+{group}@{PREFETCHED}.{group}.{name}={name}" for group, name in sorted(todo)]
        try:
            composed = compose(overrides=[*search_path_overrides(), *overrides])
        except Exception:  # noqa: BLE001 - an optimisation only: each option is composed alone, with its own error
            return
        for group, name in todo:
            node = OmegaConf.select(composed, f"{PREFETCHED}.{group}.{name}")
            if not OmegaConf.is_dict(node):
                continue
            plain = OmegaConf.to_container(node, resolve=False)
            if "${" in json.dumps(plain, default=str):
                continue
            alone = OmegaConf.create({group: plain})
            OmegaConf.set_struct(alone, True)  # as Hydra's compose leaves a config
            _remember(_cache_key(gh, "option", group, name), alone)


def app_groups_text(choices: DictConfig | dict) -> str:
    """An app's `--help` lines for the config groups its defaults list uses (`hydra.runtime.choices`, less
    Hydra's own): each group's options and current choice, so an app lists its own groups, no other app's."""
    lines = []
    for group, choice in sorted(dict(choices).items()):
        if group.startswith("hydra/"):
            continue
        options = available(group.partition("@")[0])  # `model@judge.runner`: the model group, placed there
        text = f"{group} (now {choice or 'none'}): {', '.join(options)}"
        lines.append(textwrap.fill(text, width=110, subsequent_indent="    ", break_on_hyphens=False))
    return "\n".join(lines) or "(none: this app takes settings only)"


if not OmegaConf.has_resolver("fp_app_groups"):  # read by conf/hydra/help/facet_probe.yaml
    OmegaConf.register_new_resolver("fp_app_groups", app_groups_text)
