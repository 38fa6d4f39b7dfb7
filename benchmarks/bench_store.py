"""Trial store: appends under per-trial fsync vs group commit, and reopening (the resume index), in one run.

    nice python benchmarks/bench_store.py [--trials 20000] [--dir /tmp] [--group 256]

Records are reference-policy sized (~1 kB). The figures depend on the disk and on what else writes to it; this
machine is shared, so compare the modes within one run only.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from facet_probe.core.trials import Trial
from facet_probe.store.trial_store import PER_TRIAL, Commit, TrialStore


def make(i: int) -> Trial:
    return Trial(trial_key=f"{i:024x}", call_key=f"c{i:023x}", model="policy_00", facet="option_order",
                 dataset="synthetic_mcq", item_id=f"synthetic_mcq::{i // 6}", ordering_idx=i % 6, repeat_idx=0,
                 permutation=[0, 1, 2, 3], component_ids=["a", "b", "c", "d"], prompt_hash="f" * 16, mode="direct",
                 raw_output="The first option shown looks right. The answer is (B).", answer_normalized="B",
                 parse_status="ok", model_fingerprint="e" * 16, provenance={"policy": "position_biased", "p": 0.3},
                 created_at="2026-12-01T12:00:00+00:00")


def append_all(path: Path, trials: list[Trial], commit: Commit) -> float:
    t0 = time.perf_counter()
    with TrialStore(path, commit=commit) as store:
        for t in trials:
            store.append(t)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--dir", default=None, help="where the store files go (default: a temp folder)")
    ap.add_argument("--group", type=int, default=256, help="group commit: trials per fsync")
    args = ap.parse_args()
    trials = [make(i) for i in range(args.trials)]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared: figures of this run only)")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for label, commit in (("per_trial", PER_TRIAL), (f"group({args.group})", Commit(every=args.group, ms=1000))):
            path = Path(tmp) / f"{label}.jsonl"
            seconds = append_all(path, trials, commit)
            print(f"append {label:12s} {seconds:7.2f} s  {args.trials / seconds:9.0f} trials/s")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        with TrialStore(path) as store:
            opened = time.perf_counter() - t0
            assert len(store) == args.trials
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(f"reopen (index of keys) {opened:7.2f} s  peak RSS grew by {grown:.0f} MB "
              f"({path.stat().st_size / 2**20:.0f} MB file)")


if __name__ == "__main__":
    main()
