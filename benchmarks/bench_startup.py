"""Start-up and wrap-up of the command line: `python -m facet_probe model=oracle limit=5` (its time to the first
call and after the last answer, from the app's closing log line, and its wall time), `facet-probe --help` and
`python -c "import facet_probe"` beside them, each a fresh process, run in alternation; medians.

    python benchmarks/bench_startup.py                      # 7 rounds
    python benchmarks/bench_startup.py --rounds 11 --baseline /tmp/base --imports

Goals (a quiet machine): the oracle audit's first call within 3 s of the process's start, `--help` within 1.5 s.
`--baseline DIR` runs the same commands with DIR (a checkout's root, e.g. `git archive <commit> facet_probe | tar
-x -C DIR`) first on the Python path, alternating with this checkout (wall times; a checkout whose audit does
not log the closing line has no first-call figure). `--imports` prints the heaviest imports of `--help` and of
the audit (`python -X importtime`, cumulative).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The closing log line of an audit (facet_probe/app/timeline.py).
CLOSING = re.compile(r"first call after ([\d.]+) s, ([\d.]+) s after the last answer")
PYTHON = sys.executable
SCRIPT = Path(sys.executable).parent / "facet-probe"  # the console script (pyproject [project.scripts])
AUDIT = [PYTHON, "-m", "facet_probe", "model=oracle", "limit=5", "progress=false"]
HELP = [str(SCRIPT), "--help"] if SCRIPT.is_file() else [PYTHON, "-m", "facet_probe", "--help"]
IMPORT = [PYTHON, "-c", "import facet_probe"]


def run(args: list[str], source: str | None, folder: Path | None = None) -> tuple[float, str]:
    """Wall seconds of one fresh process of `args` and what it printed (stdout and stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if source:
        env["PYTHONPATH"] = source
    extra = [f"hydra.run.dir={folder}"] if folder is not None else []
    started = time.perf_counter()
    proc = subprocess.run([*args, *extra], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    return wall, proc.stdout + proc.stderr


def heaviest_imports(args: list[str], n: int = 12) -> list[str]:
    """The `n` imports of `args` (a command) with the most cumulative time (`PYTHONPROFILEIMPORTTIME`)."""
    with tempfile.TemporaryDirectory() as tmp:
        extra = [f"hydra.run.dir={tmp}/run"] if "--help" not in args else []
        proc = subprocess.run([*args, *extra], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
            rows.append((int(cumulative), name))
    return [f"{us / 1e6:6.3f} s  {name}" for us, name in sorted(rows, reverse=True)[:n]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--baseline", help="a checkout's root whose facet_probe runs too, alternating")
    ap.add_argument("--imports", action="store_true", help="also print the heaviest imports (-X importtime)")
    args = ap.parse_args()

    sources = {"this checkout": None, **({"baseline": str(Path(args.baseline))} if args.baseline else {})}
    figures: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for round_no in range(args.rounds):
            for label, source in sources.items():
                folder = Path(tmp) / f"{label.replace(' ', '_')}-{round_no}"
                wall, out = run(AUDIT, source, folder)
                figures.setdefault((label, "audit wall"), []).append(wall)
                if (closing := CLOSING.search(out)) is not None:
                    figures.setdefault((label, "audit: to first call"), []).append(float(closing.group(1)))
                    figures.setdefault((label, "audit: after last answer"), []).append(float(closing.group(2)))
                figures.setdefault((label, "--help"), []).append(run(HELP, source)[0])
                figures.setdefault((label, "import facet_probe"), []).append(run(IMPORT, source)[0])
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print(f"medians of {args.rounds} alternating rounds (s), {os.cpu_count()} CPUs, load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'':<30}" + "".join(f"{label:>16}" for label in sources) + ("  ratio" if args.baseline else ""))
    for what in ("audit: to first call", "audit: after last answer", "audit wall", "--help", "import facet_probe"):
        values = [statistics.median(figures[(label, what)]) if (label, what) in figures else None for label in sources]
        cells = "".join(f"{v:>16.2f}" if v is not None else f"{'-':>16}" for v in values)
        ratio = f"  x{values[1] / values[0]:.2f}" if args.baseline and None not in values and values[0] else ""
        print(f"{what:<30}{cells}{ratio}")
    if args.imports:
        for name, command in (("--help", HELP), ("the oracle audit", AUDIT)):
            print(f"\nheaviest imports of {name} (cumulative):")
            print("\n".join(heaviest_imports(command)))


if __name__ == "__main__":
    main()
