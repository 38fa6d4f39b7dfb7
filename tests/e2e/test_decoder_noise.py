"""End to end (issue 22, points 6 and 7): the decoder grid experiment of the tiny VLM at two temperatures (a real
multirun of `experiment=decoder_grid`, one run folder per temperature, two cells each), then
`python -m facet_probe.decoder` on the sweep folder, each in this process (`run_module`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from facet_probe_dev.testing.in_process import Ran, run_module
from tests.decoder.test_noise import HF, toy_trials

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

ROOT = Path(__file__).resolve().parents[2]
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run(module: str, *args: str, cwd: Path) -> Ran:
    """`python -m <module> <args>` in this process."""
    return run_module(module, *args, cwd=cwd, env=ENV)


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    sweep = tmp_path_factory.mktemp("grid")
    done = run("facet_probe", "-m", "experiment=decoder_grid", "limit=2", "repeats=2",  # the grid, made small
               "model.generation.temperature=0.0,1.0", "progress=false", f"out_root={sweep}",
               f"hydra.sweep.dir={sweep}", cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return sweep


def run_folders(sweep: Path) -> dict[float, Path]:
    folders = {}
    for status in sweep.rglob("run_status.json"):
        trial = json.loads((status.parent / "trials.jsonl").read_text().splitlines()[0])
        folders[trial["provenance"]["generation"]["temperature"]] = status.parent
    return folders


def test_the_grid_writes_one_folder_per_temperature(grid):
    folders = run_folders(grid)
    assert sorted(folders) == [0.0, 1.0] and all(f.parent.name == "decoder_grid" for f in folders.values())
    assert all(f.name.startswith("direct-k6-seed42-r2_") and "model.generation.temperature=" in f.name
               for f in folders.values())


def test_the_decomposition_of_the_grid(grid, tmp_path):
    done = run("facet_probe.decoder", f"input={grid}", f"out={tmp_path}", "bootstrap=200", cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "temperature(s) 0, 1" in done.stdout
    pooled = pd.read_csv(tmp_path / "decoder_decomposition.csv")
    by_dataset = pd.read_csv(tmp_path / "decoder_decomposition_by_dataset.csv")
    assert pooled["facet"].tolist() == ["evidence_chunk_order"] * 2 + ["option_order"] * 2
    assert pooled["temperature"].tolist() == [0.0, 1.0] * 2 and (pooled["n_items"] == 2).all()
    assert (pooled["n_trials"] == 2 * 6 * 2).all() and (pooled["median_same_pairs"] == 6).all()
    t0 = pooled[pooled["temperature"] == 0.0]
    assert (t0["d_same"] == 0).all() and (t0["parse_rate_drift"] == 0).all()  # greedy: each re-ask agrees
    shared = [c for c in pooled.columns if c in by_dataset.columns and c != "dataset"]
    pd.testing.assert_frame_equal(pooled[shared], by_dataset[shared])  # one dataset per facet: the same rows


def test_runs_without_repeats_are_refused_with_what_to_do(tmp_path):
    path = tmp_path / "trials.jsonl"
    toy_trials([(HF, 1.0, "d1", "A", "X", ["X"], ["Y"])]).to_json(path, orient="records", lines=True)
    done = run("facet_probe.decoder", f"input={path}", f"out={tmp_path / 'out'}", cwd=ROOT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "repeats >= 2" in done.stderr and not (tmp_path / "out").exists()


def test_no_two_items_sample_from_one_random_stream(grid):
    records = [json.loads(line) for line in (run_folders(grid)[1.0] / "trials.jsonl").read_text().splitlines()]
    seeds = {(r["ordering_idx"], r["repeat_idx"]): set() for r in records}
    for r in records:
        seeds[(r["ordering_idx"], r["repeat_idx"])].add(r["provenance"]["seed"])
    n_items = len({(r["facet"], r["item_id"]) for r in records})
    assert n_items == 4 and all(len(s) == n_items for s in seeds.values())  # a seed per item at each (o, r)
