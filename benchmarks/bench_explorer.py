"""Time the flip explorer: building explorer.html (and its chunk files), and headless Chromium loading and
rendering it (goal: under 2 s, and page plus data under 50 MB at 400k trials), then opening a flipped item.

    python benchmarks/bench_explorer.py [--run <run folder>] [--loads 3] [--chromium /usr/bin/chromium]
    python benchmarks/bench_explorer.py --trials 400000 [--out /tmp/bench_explorer]

Without --run or --trials it makes a 7,200-trial run: `python -m facet_probe model=position_biased` (the
default audit's 6 cells x 200 items x K = 6, from a reference policy that flips, so the page has flipped
items to open). `--trials N` makes a paper-scale panel the way benchmarks/bench_scale.py does (its plan and
append stages: 18 position-biased reference policies x the offline panel's 6 cells x N / 648 items x K = 6,
through the trial store) in `<out>/n<N>`, once: a later call with the same --out reuses it.
Chromium is Debian's (apt-get install -y chromium), driven through Playwright's PyPI package; nothing is
downloaded. Prints: build seconds, the page's size and its data files' (explorer_data/), and per load the
time from navigation start to the page's first render (the figure the goal is about), the wall time of the
load, and the time to filter to flipped items and open one (its chunk loaded on demand).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def make_run(root: Path) -> Path:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "facet_probe", "model=position_biased", f"out_root={root}", "progress=false"],
                   check=True, env=env, capture_output=True)
    (folder,) = root.glob("position_biased/offline/*")
    return folder


def make_panel(out: Path, n_trials: int) -> Path:
    """A paper-scale panel through bench_scale's plan and append stages, made once per --out."""
    folder = out / f"n{n_trials}"
    done = folder / ".bench_explorer_complete"
    if not done.is_file():
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        subprocess.run([sys.executable, str(Path(__file__).with_name("bench_scale.py")), "--trials", str(n_trials),
                        "--out", str(out), "--stages", "plan,append"], check=True, env=env)
        done.touch()
    return folder


def mb(paths) -> float:
    return sum(p.stat().st_size for p in paths) / 1e6


def build(folder: Path) -> float:
    """Seconds for the report step's explorer build, from the run's stored trials."""
    from facet_probe.metrics.flips import item_metrics
    from facet_probe.report.explorer.build import explorer_for_report, one_hydra
    from facet_probe.scoring.run_trials import read_run
    from facet_probe.store.reading import read_items

    trials = read_run(folder).trials
    items = read_items([folder / "items.jsonl"])
    metrics = item_metrics(trials)
    with one_hydra():  # as in the audit app, where Hydra is up already
        from facet_probe.report.explorer.seen import facet_named

        for facet in trials["facet"].unique():
            facet_named(facet)
        started = time.perf_counter()
        explorer_for_report(folder, trials, items, metrics, f"facet_probe run: {folder.name}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", type=Path, default=None)
    parser.add_argument("--trials", type=int, default=None, help="make a panel of about this many trials")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_explorer"), help="where --trials makes it")
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (shared machine: "
          "other processes run beside this one)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.run or (make_panel(args.out, args.trials) if args.trials else make_run(Path(tmp)))
        seconds = build(folder)
        page_path = folder / "explorer.html"
        with (folder / "trials.jsonl").open("rb") as f:
            n_trials = sum(1 for _ in f)
        print(f"run: {folder} ({n_trials} trials)")
        chunks = sorted((folder / "explorer_data").glob("*.js"))
        print(f"build explorer.html: {seconds:.2f} s (facets loaded; rendering and checking every prompt); page "
              f"{mb([page_path]):.1f} MB + data {mb(chunks):.1f} MB in {len(chunks)} chunk files (largest "
              f"{max((mb([c]) for c in chunks), default=0):.1f} MB)")
        renders, walls, opens = [], [], []
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(tempfile.mkdtemp(), executable_path=args.chromium,
                                                           headless=True, args=FLAGS,
                                                           viewport={"width": 1500, "height": 950})
            for _ in range(args.loads):
                page = context.new_page()
                started = time.perf_counter()
                page.goto(page_path.as_uri())
                page.wait_for_function("document.body.dataset.ready === '1'", timeout=60_000)
                walls.append(time.perf_counter() - started)
                renders.append(page.evaluate("window.explorerReadyAt") / 1000)  # ms since navigation start
                page.select_option("#f-status", "flipped")
                started = time.perf_counter()
                page.locator("table.items tbody tr").first.click()
                page.wait_for_selector(".ordering")
                opens.append(time.perf_counter() - started)
                page.close()
            context.close()
        print(f"headless Chromium, navigation start -> page rendered: median {statistics.median(renders):.2f} s "
              f"(loads: {', '.join(f'{r:.2f}' for r in renders)}; goal < 2 s)")
        print(f"wall time of a load (goto + first render): median {statistics.median(walls):.2f} s")
        print(f"filter to flipped + open an item: median {statistics.median(opens) * 1000:.0f} ms")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
