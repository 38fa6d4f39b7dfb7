"""Does vLLM resolve beside this project? pip's own answer, read from `pip install --dry-run --report`.

Two ways (docs/hf_models.md, "vLLM"): beside the dev install (this venv's packages kept, as `pip install vllm` into
the project's venv would do) and in a fresh venv (`--ignore-installed`: nothing installed yet, as in the venv of its
own vLLM is served from; there with the project itself, so the in-process engine, `model=vllm_<config>`, could run
too). For each way it prints what pip would install, what it would change among the installed packages (downgrades,
upgrades), and which installed packages' own requirements the result would break (what `pip check` would say
after); a resolution that fails prints pip's conflict lines. Asks the package index (no download of wheels: the
index serves their metadata); not run by CI.

    python -m facet_probe_dev.vllm_resolution [--vllm vllm==0.30.0] [--out outputs/vllm_resolution]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from facet_probe.runners.vllm_engine import VLLM_PIN
from facet_probe_dev.packages import installed_here, release

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Change:
    """An installed package pip would replace: from `installed` to `planned`."""

    name: str
    installed: str
    planned: str

    @property
    def kind(self) -> str:
        return "downgrade" if Version(self.planned) < Version(self.installed) else "upgrade"


@dataclass(frozen=True)
class Broken:
    """An installed package whose requirement the planned versions would no longer meet."""

    package: str
    requirement: str
    found: str


def planned(report: Mapping) -> dict[str, str]:
    """What a pip report (`--report`, format version 1) would install: canonical name -> version."""
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}


def changes(plan: Mapping[str, str], installed: Mapping[str, str]) -> list[Change]:
    """The installed packages the plan would replace with another version, by name."""
    return [Change(name, installed[name], version) for name, version in sorted(plan.items())
            if name in installed and release(version) != release(installed[name])]


def broken(plan: Mapping[str, str], installed: Mapping[str, str],
           requires: Mapping[str, Iterable[str]]) -> list[Broken]:
    """Installed packages the plan leaves in place whose requirements (`requires`: name -> Requires-Dist lines,
    extras' lines left out) the resulting versions would not meet."""
    after = {**installed, **plan}
    out = []
    for package in sorted(set(installed) - set(plan)):
        for line in requires.get(package, ()):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            found = after.get(canonicalize_name(req.name))
            if found is not None and not req.specifier.contains(release(found), prereleases=True):
                out.append(Broken(package, str(req), found))
    return out


def conflict_lines(stderr: str) -> list[str]:
    """pip's explanation of a failed resolution: the lines from "The conflict is caused by" to its hints."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if "conflict is caused by" in line), None)
    if start is None:
        return [line for line in lines if "ERROR" in line]
    end = next((i for i, line in enumerate(lines) if line.startswith("To fix")), len(lines))
    return [line for line in lines[start:end] if line.strip()]


def describe(way: str, report: Mapping | None, stderr: str, installed: Mapping[str, str],
             requires: Mapping[str, Iterable[str]]) -> list[str]:
    """The lines printed for one way: resolves or not, what it installs, changes and breaks."""
    if report is None:
        return [f"{way}: does NOT resolve", *(f"  {line}" for line in conflict_lines(stderr))]
    plan = planned(report)
    changed, broke = changes(plan, installed), broken(plan, installed, requires)
    out = [f"{way}: resolves; {len(plan)} packages to install, {len(changed)} installed ones changed, "
           f"{len(broke)} installed ones broken"]
    out += [f"  {c.kind}: {c.name} {c.installed} -> {c.planned}" for c in changed]
    out += [f"  broken: {b.package} needs {b.requirement}, would find {b.found}" for b in broke]
    return out


def dry_run(specs: list[str], report: Path, fresh: bool) -> tuple[dict | None, str]:
    """pip's dry-run resolution of `specs` (its report, None when it fails) and its stderr."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), *specs]
    if fresh:
        cmd.insert(4, "--ignore-installed")
    report.unlink(missing_ok=True)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    ok = done.returncode == 0 and report.is_file()
    return (json.loads(report.read_text()) if ok else None), done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m facet_probe_dev.vllm_resolution",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", default=VLLM_PIN, help=f"the vLLM requirement (default {VLLM_PIN})")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "vllm_resolution",
                        help="where pip's two reports are written")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    installed, requires = installed_here()
    ways = {"beside the dev install": ([args.vllm], False),
            "in a fresh venv, with the project": ([args.vllm, str(ROOT)], True)}
    for i, (way, (specs, fresh)) in enumerate(ways.items()):
        report, stderr = dry_run(specs, args.out / f"report_{i + 1}.json", fresh)
        print("\n".join(describe(way, report, stderr, {} if fresh else installed, requires)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
