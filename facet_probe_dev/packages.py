"""This venv's installed distributions and their requirements, read from their metadata: what the dev scripts that
ask what pip would change (vllm_resolution), what a GPU machine lacks (gpu_wheels) or what is installed here
(lowest_versions) start from."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def installed_here() -> tuple[dict[str, str], dict[str, list[str]]]:
    """This venv's distributions: canonical name -> version, and canonical name -> Requires-Dist lines."""
    versions, requires = {}, {}
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        versions[name], requires[name] = dist.version, list(dist.requires or [])
    return versions, requires


def release(version: str) -> Version:
    """A version without its local label (`2.13.0+cpu` -> `2.13.0`: it meets `==2.13.0` and is no change from it)."""
    return Version(Version(version).base_version if "+" in version else version)


def requirement_names(lines: Iterable[str]) -> set[str]:
    """The canonical names of Requires-Dist lines that apply here with no extra asked for."""
    out = set()
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.add(canonicalize_name(req.name))
    return out


def closure(roots: Iterable[str], requires: Mapping[str, Iterable[str]]) -> set[str]:
    """`roots` and everything they require, transitively (`requires`: name -> Requires-Dist lines)."""
    seen, todo = set(), [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(requirement_names(requires.get(name, ())) - seen)
    return seen
