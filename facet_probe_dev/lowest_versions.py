"""The HF runner tests against the lowest supported transformers (pyproject.toml's floor), in a venv of their own.

GPU boxes come with their own torch and transformers; pyproject.toml states the range the project supports, and
this script is what backs its floor: a fresh venv with `transformers==<floor>` (and the torch installed here: the
only CPU build this machine has), the project without its heavy extras, then the HF runner tests. Not run by CI (a
venv takes minutes); the outcome is recorded in docs/hf_models.md ("Supported versions").

    python -m facet_probe_dev.lowest_versions [--transformers 5.4.0] [--torch 2.13.0] [--venv /tmp/fp-lowest]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from facet_probe_dev.packages import installed_here, release

ROOT = Path(__file__).resolve().parents[1]
#: the tests of the HF runners (and of the vLLM runner, which wraps them)
TESTS = ("tests/runners/hf", "tests/runners/test_vllm_engine_paths.py", "tests/runners/test_vllm_engine.py")
#: what the project brings into the venv besides torch and transformers: the extras those tests use (the vLLM server
#: preset is an OpenAI client), the test tools
INSTALL = (".[quant,adapters,api]", "pytest>=8", "pytest-xdist>=3.5", "filelock>=3.12", "hypothesis>=6.100")


def floor(requirement: str) -> str | None:
    """The lowest version a requirement string allows (its `>=` bound), None when it states none."""
    return next((s.version for s in Requirement(requirement).specifier if s.operator == ">="), None)


def declared_floors(pyproject_text: str) -> dict[str, str]:
    """The `>=` floor of each of pyproject.toml's dependencies that states one, by name."""
    deps = tomllib.loads(pyproject_text)["project"]["dependencies"]
    return {Requirement(d).name: v for d in deps if (v := floor(d)) is not None}


def commands(venv: Path, transformers: str, torch: str) -> list[list[str]]:
    """Make the venv, install the pins and the project, run the tests (in order)."""
    python = str(venv / "bin" / "python")
    return [[sys.executable, "-m", "venv", str(venv)],
            [python, "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [python, "-m", "pip", "install", "-q", f"torch=={torch}", f"transformers=={transformers}", "-e",
             *INSTALL],
            [python, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *TESTS]]


def main(argv: list[str] | None = None) -> int:
    floors = declared_floors((ROOT / "pyproject.toml").read_text())
    parser = argparse.ArgumentParser(prog="python -m facet_probe_dev.lowest_versions",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--transformers", default=floors["transformers"],
                        help=f"the transformers to test (default: pyproject's floor, {floors['transformers']})")
    parser.add_argument("--torch", default=str(release(installed_here()[0]["torch"])),
                        help="the torch to install (default: this venv's; the only CPU build on this machine)")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/facet_probe_lowest"), help="the venv to make")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    for cmd in commands(args.venv, args.transformers, args.torch):
        print("$", " ".join(cmd), flush=True)
        code = subprocess.run(cmd, cwd=ROOT).returncode
        if code != 0:
            break
    print(f"transformers {args.transformers}, torch {args.torch}: exit {code} after "
          f"{time.perf_counter() - t0:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
