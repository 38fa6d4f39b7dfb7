"""`python -m facet_probe.attack` killed with SIGKILL mid-run, again and again, then run to the end: every
sample once, the same rows as an uninterrupted run, and no half-written image, table or status."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from facet_probe.attack.pixels import load_png
from facet_probe.store.jsonl import iter_records
from facet_probe_dev.testing.in_process import run_argv
from facet_probe_dev.testing.kill import kill_when

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
N = 4


def attack_cmd(model: Path, out_root: Path) -> list[str]:
    return [sys.executable, "-m", "facet_probe.attack", f"model.local_path={model}", f"out_root={out_root}",
            "attack=answer", f"limit={N}", "attack.steps=6", "attack.update_every=3", "max_new_tokens=16",
            "batch_size=1"]


def results_file(out_root: Path) -> Path | None:
    found = list(out_root.glob("attack/**/results.jsonl"))
    return found[0] if found else None


def rows_done(out_root: Path) -> int:
    path = results_file(out_root)
    return path.read_bytes().count(b"\n") if path else 0


def comparable(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("seconds",)}


@pytest.mark.slow
def test_an_attack_killed_again_and_again_resumes_with_every_sample_once(tmp_path, answering_path):
    fresh = tmp_path / "fresh"
    done = run_argv(attack_cmd(answering_path, fresh), cwd=ROOT)  # only the kills need a process of their own
    assert done.returncode == 0, done.stderr[-3000:]
    expected = {r["sample_id"]: comparable(r) for r in iter_records(results_file(fresh))}
    assert len(expected) == N

    out = tmp_path / "killed"
    kills = 0
    for target in (1, 2):  # kill once this many samples are stored
        at_kill = kill_when(attack_cmd(answering_path, out), lambda: rows_done(out), target, cwd=ROOT, env=ENV)
        kills += 1
        assert target <= at_kill < N
    final = run_argv(attack_cmd(answering_path, out), cwd=ROOT)
    assert final.returncode == 0, final.stderr[-3000:]
    assert kills == 2

    results = results_file(out)
    rows = list(iter_records(results))
    assert len(rows) == len({r["sample_id"] for r in rows}) == N  # none lost, none twice
    assert {r["sample_id"]: comparable(r) for r in rows} == expected  # what an uninterrupted run gives
    run_dir = results.parent
    for r in rows:
        for name in (r.get("images") or {}).get("adv", []) + (r.get("images") or {}).get("clean", []):
            assert load_png(run_dir / name).shape[0] == 3  # whole PNGs
    assert json.loads((run_dir / "run_status.json").read_text())["state"] == "done"
    assert json.loads((run_dir / "summary.json").read_text())["n"] == N
