"""The package passes its type check: mypy over facet_probe, as configured in pyproject.toml (`make typecheck`).
CI runs it here, as a real process (the command is what is tested)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 40 s of CPU cold (a fresh checkout), 7 s warm: mypy keeps its cache in .mypy_cache/
def test_the_package_passes_its_type_check() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mypy (pip install -e '.[dev]' brings it):\n{done.stdout}{done.stderr}"
