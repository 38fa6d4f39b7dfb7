"""The installed product: the wheel holds the package, its configs and data (the tiny VLM's weights among them),
and none of the development tree (fake servers, tiny model builders, the tiny VLM trainer)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_the_wheel_ships_the_package_and_its_data_but_not_the_development_tools(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(tmp_path)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("facet_probe-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not [n for n in names if n.startswith(("facet_probe_dev/", "facet_probe/testing/", "facet_probe/tiny_vlm/"))]
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "facet_probe").rglob("*.py")}
    assert modules <= names  # every module of the package is installed
    for data in ("facet_probe/assets/tiny_vlm/model.safetensors", "facet_probe/conf/config.yaml",
                 "facet_probe/conf/model/tiny_vlm.yaml", "facet_probe/paper/published/SOURCE.md"):
        assert data in names
    dist_info = next(n.partition("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert f"{dist_info}/licenses/LICENSE" in names  # the license file, beside the license pyproject names
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
