"""`python -m facet_probe.paper` killed with SIGKILL at random moments while it writes its targets, again and
again into one folder (between two files, and in the middle of one: its temp file is there): every table file
there is whole (the uninterrupted run's bytes), and running the same command again completes with every
table file equal to an uninterrupted run's and no temp file left (issue 43, points 14 and 15)."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from facet_probe import api
from facet_probe_dev.testing.in_process import run_argv
from facet_probe_dev.testing.kill import kill_when

ROOT = Path(__file__).resolve().parents[2]
ENV = {**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}, "HF_HUB_OFFLINE": "1",
       "OMP_NUM_THREADS": "1"}
TABLES = (".csv", ".tex")


def paper_cmd(runs: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "facet_probe.paper", f"input={runs}", f"out={out}", "bootstrap=50"]


def outputs(out: Path) -> dict[str, Path]:
    return {p.name: p for p in out.iterdir() if p.is_file() and not p.name.startswith(".")} if out.exists() else {}


def written_since(out: Path, t0: float) -> int:
    return sum(p.stat().st_mtime >= t0 for p in outputs(out).values())


def writing(out: Path, t0: float, after: int) -> int:
    """1 once `after` files are (re)written and this run's temp file is there (a write in progress), else 0."""
    return int(out.exists() and written_since(out, t0) >= after and any(new_temp(p, t0) for p in out.iterdir()))


def new_temp(path: Path, t0: float) -> bool:
    """A hidden temp file made since `t0` (False once it is renamed away)."""
    try:
        return path.name.startswith(".") and path.stat().st_mtime >= t0
    except FileNotFoundError:
        return False


def assert_whole(out: Path, reference: dict[str, bytes]) -> None:
    """Every file a reader sees is a whole one: tables equal the uninterrupted run's, the rest parse."""
    for name, path in outputs(out).items():
        if path.suffix in TABLES:
            assert path.read_bytes() == reference[name], name
        elif path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".png":
            Image.open(path).load()
        elif path.suffix == ".pdf":
            assert path.read_bytes().rstrip().endswith(b"%%EOF"), name


@pytest.mark.slow
def test_the_paper_app_killed_at_random_moments_reruns_to_the_uninterrupted_tables(tmp_path):
    runs = tmp_path / "runs"
    for model in ("oracle", "always_first"):
        api.audit([f"model={model}", "facet=option_order", "dataset=synthetic_mcq", "limit=6", "progress=false",
                   f"hydra.run.dir={runs / model}"])
    fresh = api.paper([f"input={runs}", f"out={tmp_path / 'fresh'}", "bootstrap=50"]).run_dir
    reference = {name: p.read_bytes() for name, p in outputs(fresh).items() if p.suffix in TABLES}
    assert len(reference) >= 10

    out, rng = tmp_path / "killed", random.Random(15)
    n_files = len(outputs(fresh))
    for mid_write in (True, False, True):  # kill in the middle of a file, or once some files are (re)written
        t0 = time.time() - 0.01
        after = rng.randint(0, n_files // 2) if mid_write else rng.randint(1, n_files - 2)
        progress = (lambda t0=t0, after=after: writing(out, t0, after)) if mid_write else (
            lambda t0=t0: written_since(out, t0))
        kill_when(paper_cmd(runs, out), progress, 1 if mid_write else after, cwd=ROOT, env=ENV)
        assert_whole(out, reference)
    assert any(p.name.startswith(".") for p in out.iterdir()), "no kill landed in the middle of a write"
    again = run_argv(paper_cmd(runs, out), cwd=ROOT)  # the rerun in this process: only the kills need their own
    assert again.returncode == 0, again.stderr[-3000:]
    assert {name: p.read_bytes() for name, p in outputs(out).items() if p.suffix in TABLES} == reference
    assert_whole(out, reference)
    assert sorted(p.name for p in out.iterdir()) == sorted(outputs(fresh)), "a killed write's temp was left"
