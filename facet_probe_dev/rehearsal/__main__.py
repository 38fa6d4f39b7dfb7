"""`python -m facet_probe_dev.rehearsal [--scale ci|full] [--out <folder>]` (`make rehearsal`): run every step, then
check the joins; exit 1 if a step failed or a join does not hold."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from facet_probe_dev.rehearsal.joins import check
from facet_probe_dev.rehearsal.run import SCALES, rehearse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m facet_probe_dev.rehearsal", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--out", type=Path, default=Path("outputs/rehearsal"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = rehearse(SCALES[args.scale], args.out)
    problems = check(result)
    minutes = (time.perf_counter() - started) / 60
    for problem in problems:
        print(f"JOIN BROKEN: {problem}")
    print(f"rehearsal ({args.scale}) in {minutes:.1f} min: {len(result.outcomes)} commands, "
          f"{len(result.failed)} failed, {len(problems)} broken joins; logs in {args.out / 'logs'}")
    return 1 if problems or result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
