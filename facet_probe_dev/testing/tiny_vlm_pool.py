"""The tiny VLM trainer's item pool, generated once per test session: every `train` call (and every process it
spawns) runs `Pool.load`, and each set's train split first screens out its first 5000 test items (seconds on a
loaded machine, far more than a tiny run's steps). `install` gives `Pool.load` the same items (prefix-stable and
frozen) from a memo; `worker` carries the memo into `train(procs=2)`'s spawned processes. Training stays real."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from facet_probe_dev.tiny_vlm import data
from facet_probe_dev.tiny_vlm import train as train_module

#: the memo file a spawned worker reads (set by `share_with_workers`)
ENV = "FP_TEST_TINY_VLM_ITEMS"
_load_items = data.load_items
_real_worker = train_module._worker
_memo: dict[tuple, list] = {}


def cached_load_items(name: str, split: str, n: int, seed: int = 42) -> list:
    """`data.load_items` from the memo: the first `n` of the longest list generated for (set, split, seed) (the
    splits are prefix-stable), generated only when that is shorter; a new list each call (callers may keep it)."""
    key = (name, split, seed)
    if len(_memo.get(key, ())) < n:
        _memo[key] = _load_items(name, split, n, seed)
    return _memo[key][:n]


def install(monkeypatch) -> None:
    """`Pool.load` through the memo in this process, and in the processes `train` spawns."""
    monkeypatch.setattr(data, "load_items", cached_load_items)
    monkeypatch.setattr(train_module, "_worker", worker)


def save(path: Path) -> Path:
    """Write the memo to `path` (for another process: `remember`)."""
    path.write_bytes(pickle.dumps(_memo))
    return path


def remember(path: Path) -> None:
    """Add the memo another process saved at `path` to this one's."""
    _memo.update(pickle.loads(Path(path).read_bytes()))


def share_with_workers(folder: Path, monkeypatch) -> None:
    """Write the memo (fill it first, e.g. by a one-process run) where spawned workers read it."""
    monkeypatch.setenv(ENV, str(save(folder / "tiny_vlm_items.pkl")))


def worker(rank: int, world: int, cfg, out: str, port: int, result_file: str) -> None:
    """`train._worker` with the parent's memo installed first (a spawned process imports everything afresh)."""
    path = os.environ.get(ENV)
    if path and Path(path).is_file():
        remember(Path(path))
        data.load_items = cached_load_items
    _real_worker(rank, world, cfg, out, port, result_file)
