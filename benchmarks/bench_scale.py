"""The audit pipeline at paper scale on one machine: a manifest of N trials (18 models x the offline panel's six
cells, K = 6, items per cell = N / 648) answered by reference policies, timed stage by stage with peak memory.

    nice python benchmarks/bench_scale.py --trials 100000 [--out /tmp/bench_scale] [--stages plan,append,...]

Stages (each in its own process, so its peak RSS is its own): plan (manifest + prompts + keys for 18 models),
append (every trial through `audit.execute.run_model` into the store, group commit), resume (reopen the store and look
every planned key up), json (the reference: one bare stdlib `json.loads` per line of the trials file, nothing kept),
summary (`read_run` + the report's `summarise`; `lean_read_s`: `read_run` without provenance and usage, as ODI and
the judge read), report (`python -m facet_probe.report` on the folder into a new out folder; `rereport_s`: the same command
again, whose figures are current, so not drawn), odi_data (the positional ODI data build,
`prepare`). Each reader runs twice: first with no columnar copy of the trials (it parses the JSONL and writes the
copy, `store.columnar`), then with the copy it left. The append and resume stages plan again to know the keys: their
time excludes it, their peak RSS includes it (`plan_rss_mb` is the peak after planning).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

N_MODELS, K, CELLS = 18, 6, 6
STAGES = ("plan", "append", "resume", "json", "summary", "report", "odi_data")
READERS = ("summary", "report", "odi_data")
COLD = "-no-copy"  # a reader's first run: its copy deleted first


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(n_items: int):
    """Cells of the offline panel with `n_items` items each, the manifest rows and the run config."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from facet_probe.audit import plan as audit
    from facet_probe.config.loading import load_option
    from facet_probe.config.schema import register

    register()
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        cfg = compose("config", overrides=["model=oracle", "experiment=offline", "progress=false"])
    cells = audit.resolve_cells(cfg, None, None)
    loaded = {}
    for cell in cells:
        if cell.dataset not in loaded:
            node = OmegaConf.merge(load_option("dataset", cell.dataset), {"n": n_items})
            loaded[cell.dataset] = instantiate(node).load(limit=n_items)
        cell.items = loaded[cell.dataset]
    return cfg, cells, audit.build_run_manifest(cells, cfg)


def policies():
    from facet_probe.runners.policies import PositionBiasedPolicy

    return [PositionBiasedPolicy(name=f"policy_{m:02d}", p=0.5 * m / (N_MODELS - 1), seed=m) for m in range(N_MODELS)]


def plan_all(cells, rows):
    from facet_probe.audit import plan as audit
    from facet_probe.core.prompts import PromptMode
    from facet_probe.core.trials import fingerprint_hash

    out = []
    for runner in policies():
        fp = fingerprint_hash(runner.fingerprint())
        out.append((runner, fp, audit.plan_trials(cells, rows, runner.name, fp, PromptMode.DIRECT)))
    return out


def stage(name: str, run: Path, n_items: int) -> dict:
    """One stage in this process: {seconds, peak_rss_mb, ...}."""
    from facet_probe.audit import execute
    from facet_probe.audit import plan as audit
    from facet_probe.store.trial_store import Commit, TrialStore

    if name.removesuffix(COLD) in READERS:
        if name.endswith(COLD):
            from facet_probe.store.columnar import copy_path

            copy_path(run / "trials.jsonl").unlink(missing_ok=True)
        return read_stage(name.removesuffix(COLD), run)
    if name == "json":
        t0 = time.perf_counter()
        with (run / "trials.jsonl").open("rb") as fh:
            n = sum(1 for line in fh if json.loads(line) is not None)
        return {"seconds": time.perf_counter() - t0, "lines": n}
    t0 = time.perf_counter()
    cfg, cells, rows = build(n_items)
    if name == "plan":
        from facet_probe.audit.manifest import save_manifest

        planned = plan_all(cells, rows)
        seconds = time.perf_counter() - t0
        run.mkdir(parents=True, exist_ok=True)
        audit.write_items(cells, run / "items.jsonl")
        save_manifest(rows, run / "manifest.parquet")
        return {"seconds": seconds, "trials": sum(len(p) for _, _, p in planned), "rows": len(rows)}
    planned = plan_all(cells, rows)
    plan_rss = peak_rss_mb()
    t0 = time.perf_counter()
    extra: dict = {"plan_rss_mb": round(plan_rss)}
    if name == "append":
        with TrialStore(run / "trials.jsonl", commit=Commit(every=256, ms=1000)) as store:
            for runner, fp, plans in planned:
                execute.run_model(runner, runner.name, fp, plans, store, show_progress=False)
        extra["file_mb"] = round((run / "trials.jsonl").stat().st_size / 2**20)
    elif name == "resume":
        with TrialStore(run / "trials.jsonl") as store:
            extra["open_s"] = round(time.perf_counter() - t0, 2)
            extra["done"] = sum(store.done(p.trial_key) for _, _, plans in planned for p in plans)
    return {"seconds": time.perf_counter() - t0, **extra}


def read_stage(name: str, run: Path) -> dict:
    """The stages that read the stored run (no planning needed)."""
    extra: dict = {}
    t0 = time.perf_counter()
    if name == "summary":
        from facet_probe.report.summary import summarise
        from facet_probe.scoring.run_trials import CALL_RECORDS, read_run
        from facet_probe.store.reading import read_items

        t0 = time.perf_counter()
        trials = read_run(run).trials
        extra["read_s"] = round(time.perf_counter() - t0, 2)
        _, summary = summarise(trials, read_items([run / "items.jsonl"]), n_boot=200, seed=0)
        extra["cells"] = len(summary)
        t1 = time.perf_counter()
        read_run(run, drop=CALL_RECORDS)
        extra["lean_read_s"] = round(time.perf_counter() - t1, 2)
        t0 += time.perf_counter() - t1  # the stage's time is the full read and the summary
    elif name == "report":
        shutil.rmtree(run / "report", ignore_errors=True)  # a first report: every figure drawn
        command = [sys.executable, "-m", "facet_probe.report", f"input={run}", f"out={run / 'report'}", "bootstrap=200"]
        t0 = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        seconds = time.perf_counter() - t0
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        extra["report_process_rss_mb"] = round(child)
        t1 = time.perf_counter()  # the same report again: its figures are current, so none is drawn
        subprocess.run(command, capture_output=True, text=True, check=True)
        extra["rereport_s"] = round(time.perf_counter() - t1, 2)
        return {"seconds": seconds, **extra}
    elif name == "odi_data":
        from facet_probe.odi.pipeline import OdiRun, prepare

        t0 = time.perf_counter()
        _, datasets = prepare(OdiRun(inputs=[str(run)], outcomes=("correct",), variant="positional"))
        extra["odi_trials"] = datasets["correct"].n_trials
    return {"seconds": time.perf_counter() - t0, **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_scale"))
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--stage", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n_items = max(1, round(args.trials / (N_MODELS * CELLS * K)))
    run = args.out / f"n{args.trials}"
    if args.stage:
        print(json.dumps({"peak_rss_mb": None, **stage(args.stage, run, n_items)} | {"peak_rss_mb": round(peak_rss_mb())}))
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (shared machine: "
          "other processes run beside this one; figures are this run's only)")
    print(f"{N_MODELS} models x {CELLS} cells x {n_items} items x K={K} = {N_MODELS * CELLS * n_items * K} trials")
    stages = [s for name in args.stages.split(",") for s in ((name + COLD, name) if name in READERS else (name,))]
    for name in stages:
        proc = subprocess.run([sys.executable, __file__, "--trials", str(args.trials), "--out", str(args.out),
                               "--stage", name], capture_output=True, text=True, env=env)
        if proc.returncode:
            print(f"{name}: FAILED\n{proc.stderr[-3000:]}")
            return
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name:17s} {result.pop('seconds'):8.1f} s  peak RSS {result.pop('peak_rss_mb'):6d} MB  "
              + "  ".join(f"{k}={v}" for k, v in result.items()), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
