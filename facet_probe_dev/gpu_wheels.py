"""The wheels `python -m facet_probe_dev.gpu_check --quick` needs on a GPU machine that has only torch and transformers.

A short GPU lease may come with no network and the machine's own torch and transformers: whatever else the check
imports must arrive as wheels, at most 64 MiB together with the working tree (what the device tool carries). This
script finds them: it measures what the check imports here (its parts run on the CPU in subprocesses: the runner
rows, then the audit), adds the `quant` and `gpu` extras (bitsandbytes for the NF4 row, flash-linear-attention for
Qwen3.5's fast path), drops what a machine with torch and transformers has (their requirements, transitively, from
this venv's metadata; `--have` adds that machine's `pip freeze`), downloads each at the version tested here as a
wheel for the machine's Python (`pip download --no-deps`; a source-only one is built into a wheel with
`pip wheel --no-deps`) and prints the sizes group by group, in the order the check needs them, with what fits.

    python -m facet_probe_dev.gpu_wheels [--python-version 3.12] [--have freeze.txt] [--out outputs/gpu_wheels]
    # on the GPU machine, from the repository root:
    pip install --no-index --no-deps outputs/gpu_wheels/*.whl
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from facet_probe_dev.packages import closure, installed_here, release, requirement_names

ROOT = Path(__file__).resolve().parents[1]
#: what the device tool carries to the GPU machine: the working tree and these wheels together
CARRY_BYTES = 64 * 2**20
#: the machine is assumed to have these (and what they require)
PROVIDED = ("torch", "transformers")
#: Linux x86-64 wheel tags a GPU machine takes (newest first)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")
#: Python run in a subprocess: the CPU parts of the check, printing the distributions imported (`imported`)
RUNNER_ROWS = """
import tempfile, pathlib, torch; torch.set_num_threads(1)
from facet_probe_dev import gpu_check as g
from facet_probe_dev.testing.tiny_models import tiny_model_path
root = pathlib.Path(tempfile.mkdtemp())
for family in ("llava", "qwen3_5"):
    runner = g.hf_runner(g.PANEL_CONFIG[family], tiny_model_path(family, root), dtype="bfloat16", batch_size=8)
    g.answers(runner, g.requests(2))
"""
AUDIT_ROW = RUNNER_ROWS + """
g.check_audit("llava15_7b", tiny_model_path("llava", root), root, g.Env.here())
"""
REPORT_IMPORTS = """
import importlib.metadata as md, json, sys
names = md.packages_distributions()
print(json.dumps(sorted({d for m in list(sys.modules) for d in names.get(m.split(".")[0], [])})))
"""


def groups(imported: Mapping[str, set[str]], extras: Mapping[str, set[str]], provided: set[str],
           wanted: set[str]) -> dict[str, list[str]]:
    """Group -> the distributions it adds, in the check's order: each measured group's imports among `wanted`
    (what the project requires), then each extra's; none that the machine has (`provided`) or an earlier group
    brings."""
    out, taken = {}, set(provided)
    for group, names in [*imported.items(), *extras.items()]:
        new = sorted((names & wanted if group in imported else names) - taken)
        out[group] = new
        taken |= set(new)
    return out


def fitting(sizes: Mapping[str, Mapping[str, int]], budget: int) -> tuple[list[str], list[str]]:
    """The groups that fit `budget` bytes taken in order (a group whole or not at all), and those left out."""
    kept, left, used = [], [], 0
    for group, wheels in sizes.items():
        size = sum(wheels.values())
        if used + size <= budget:
            kept.append(group)
            used += size
        else:
            left.append(group)
    return kept, left


def shadow_site(hidden: Iterable[str], into: Path) -> Path:
    """A folder of links to this venv's site-packages less the files of the `hidden` distributions: what Python
    sees on a machine that lacks them."""
    site = Path(importlib.metadata.distribution("packaging").locate_file(""))
    gone = {part for name in hidden for f in (importlib.metadata.distribution(name).files or [])
            if (part := f.parts[0]) not in ("..", "bin")}
    into.mkdir(parents=True, exist_ok=True)
    for entry in site.iterdir():
        if entry.name not in gone and not entry.name.endswith(".pth"):
            (into / entry.name).symlink_to(entry)
    return into


def imported(code: str, hidden: Iterable[str] = ()) -> set[str] | None:
    """The distributions `code` imports, run in a fresh interpreter that sees this venv less the `hidden`
    distributions; None when it fails there (one of them is needed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = [str(ROOT), str(shadow_site(hidden, Path(tmp) / "site"))]
        done = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {path!r}\n" + code
                               + REPORT_IMPORTS], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        return None
    return {canonicalize_name(n) for n in json.loads(done.stdout.strip().splitlines()[-1])}


def needed(code: str, candidates: Mapping[str, int], hidden: set[str]) -> set[str]:
    """Of `candidates` (distribution -> wheel bytes), those `code` cannot run without, largest first; one it runs
    without (an optional import: the library uses it because it is installed here) joins `hidden`. Only wheels of
    1 MiB or more are tried (each try is a run of `code`)."""
    for name, size in sorted(candidates.items(), key=lambda kv: -kv[1]):
        if size >= 2**20 and imported(code, hidden | {name}) is not None:
            hidden.add(name)
    return set(candidates) - hidden


def extra_requirements(extra: str) -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]


def wheel_requires(wheel: Path) -> list[str]:
    """A wheel's Requires-Dist lines (its METADATA)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def fetch(spec: str, out: Path, python_version: str) -> Path:
    """One wheel for `spec` (`name==version` or a requirement) into `out`: downloaded for the machine's Python and
    Linux, else built here from its source (a pure-Python package published as source only)."""
    before = set(out.glob("*.whl"))
    tags = [a for p in PLATFORMS for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "--python-version",
           python_version, *tags, "-d", str(out), spec]
    if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), spec], check=True,
                       capture_output=True, text=True)
    return next(iter(set(out.glob("*.whl")) - before))


def fetch_group(specs: list[str], versions: Mapping[str, str], skip: set[str], out: Path,
                python_version: str) -> dict[str, int]:
    """Wheel file -> size for `specs`, fetched into `out`; a package not installed here (an extra's) brings its own
    requirements too, less those in `skip` (the machine's, or fetched already: `skip` grows)."""
    sizes, todo = {}, list(specs)
    while todo:
        req = Requirement(todo.pop(0))
        name = canonicalize_name(req.name)
        if name in skip:
            continue
        skip.add(name)
        wheel = fetch(f"{name}=={versions[name]}" if name in versions else str(req), out, python_version)
        sizes[wheel.name] = wheel.stat().st_size
        if name not in versions:
            todo.extend(r for r in wheel_requires(wheel) if requirement_names([r]))  # those that apply here
    return sizes


def wheel_name(wheel: str) -> str:
    """The canonical distribution name of a wheel file name."""
    return canonicalize_name(wheel.split("-", 1)[0])


def tree_bytes() -> int:
    """The size of the working tree's tracked files (carried with the wheels)."""
    files = subprocess.run(["git", "ls-files", "-z"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return sum((ROOT / f).stat().st_size for f in files.split("\0") if f and (ROOT / f).is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m facet_probe_dev.gpu_wheels", description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the GPU machine's Python (default: this one's)")
    parser.add_argument("--have", type=Path, default=None, help="the GPU machine's `pip freeze`: what it has already")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "gpu_wheels", help="where the wheels go")
    args = parser.parse_args(argv)
    versions, requires = installed_here()
    versions = {name: str(release(v)) for name, v in versions.items()}
    provided = closure(PROVIDED, requires)
    if args.have is not None:
        provided |= {canonicalize_name(Requirement(line.split(" @ ")[0]).name)
                     for line in args.have.read_text().splitlines() if line.strip() and not line.startswith("#")}
    code = {"runner rows": RUNNER_ROWS, "audit row": AUDIT_ROW}
    runner_rows, whole = imported(RUNNER_ROWS), imported(AUDIT_ROW)
    if runner_rows is None or whole is None:
        raise SystemExit("the check's parts do not run in this venv: run `make gpu-check` here first")
    measured = {"runner rows": runner_rows, "audit row": whole - runner_rows}
    extras = {f"{extra} extra": extra_requirements(extra) for extra in ("quant", "gpu")}
    plan = groups(measured, {g: {canonicalize_name(Requirement(r).name) for r in reqs} for g, reqs in extras.items()},
                  provided, closure(["facet_probe"], requires) - {"facet-probe"})
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.whl"):
        old.unlink()
    skip = set(provided)
    specs = {group: [r for r in extras.get(group, names) if canonicalize_name(Requirement(r).name) in names]
             for group, names in plan.items()}
    sizes = {group: fetch_group(specs[group], versions, skip, args.out, args.python_version) for group in plan}
    hidden: set[str] = set()  # imported here only because installed (the part runs without it): not shipped
    for group, part in code.items():
        keep = needed(part, {wheel_name(w): size for w, size in sizes[group].items()}, hidden)
        for wheel in [w for w in sizes[group] if wheel_name(w) not in keep]:
            (args.out / wheel).unlink()
            del sizes[group][wheel]
    tree = tree_bytes()
    kept, left = fitting(sizes, CARRY_BYTES - tree)
    for group, wheels in sizes.items():
        print(f"{group}: {sum(wheels.values()) / 2**20:.1f} MiB" + ("" if group in kept else "  (does not fit)"))
        for wheel, size in sorted(wheels.items(), key=lambda kv: -kv[1]):
            print(f"  {size / 2**20:6.1f} MiB  {wheel}")
    for group in left:
        for wheel in sizes[group]:
            (args.out / wheel).unlink()
    used = sum(sum(sizes[g].values()) for g in kept)
    print(f"optional (imported here because installed; the check runs without): {', '.join(sorted(hidden)) or 'none'}")
    print(f"working tree {tree / 2**20:.1f} MiB + wheels kept in {args.out} {used / 2**20:.1f} MiB, of "
          f"{CARRY_BYTES / 2**20:.0f} MiB; left out: {', '.join(left) or 'nothing'} (their rows say skipped there)")
    return 0 if "runner rows" in kept else 1


if __name__ == "__main__":
    sys.exit(main())
