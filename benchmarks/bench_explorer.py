"""Time the flip explorer of a 7,200-trial run (the default audit's size): building explorer.html, and headless
Chromium loading and rendering it (goal: under 2 s), then opening a flipped item.

    python benchmarks/bench_explorer.py [--run <run folder>] [--loads 3] [--chromium /usr/bin/chromium]

Without --run it makes one: `python -m facet_probe model=position_biased` (the default audit's 6 cells x 200
items x K = 6, from a reference policy that flips, so the page has flipped items to open). Chromium is
Debian's (apt-get install -y chromium), driven through Playwright's PyPI package; nothing is downloaded.
Prints: build seconds, page size, and per load the time from navigation start to the page's first render
(the figure the goal is about), the wall time of the load, and the time to open an item.
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
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.run or make_run(Path(tmp))
        seconds = build(folder)
        page_path = folder / "explorer.html"
        n_trials = len((folder / "trials.jsonl").read_text().splitlines())
        print(f"run: {folder} ({n_trials} trials)")
        print(f"build explorer.html: {seconds:.2f} s (facets loaded; rendering and checking every prompt), "
              f"{page_path.stat().st_size / 1e6:.1f} MB")
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


if __name__ == "__main__":
    main()
