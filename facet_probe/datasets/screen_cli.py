"""The position screen on real data: `python -m facet_probe.datasets.screen_cli --dataset mantis_eval --path <folder>`.

Prints the screen's counts next to the paper's (52 of 70 Mantis-Eval and 5 of 200 MedFrameQA items excluded).
A module of its own: it loads the image-set loaders, which import `datasets.screen`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hydra.utils import instantiate

from facet_probe.config.loading import load_option
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.screen import RULE_SETS, ScreenRules, Verdict, screen_counts, screen_item

PAPER_COUNTS = {"mantis_eval": (52, 70), "medframeqa": (5, 200)}


def _loader(dataset: str, path: str | None, n: int | None, rules: str):
    """The dataset's loader from its config."""
    return instantiate(load_option("dataset", dataset), path=path, n=n, screen_rules=rules)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m facet_probe.datasets.screen_cli", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--dataset", required=True, choices=sorted(PAPER_COUNTS))
    parser.add_argument("--path", default=None, help="local copy laid out as the upstream repository")
    parser.add_argument("--n", type=int, default=None, help="sample size (default: the paper's N)")
    parser.add_argument("--all", action="store_true", help="screen every eligible item, not the sample")
    parser.add_argument(
        "--show",
        choices=[v.value for v in Verdict],
        default=None,
        help="also list the items with this verdict and why",
    )
    parser.add_argument("--rules", choices=[r.value for r in ScreenRules], default=ScreenRules.REFERENCE.value)
    args = parser.parse_args(argv)
    excluded_paper, n_paper = PAPER_COUNTS[args.dataset]
    loader = _loader(args.dataset, args.path, args.n or n_paper, args.rules)
    try:
        items = loader.load_all() if args.all else loader.load()
    except DatasetUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    results = {it.item_id: screen_item(it, rules=args.rules) for it in items}
    counts = screen_counts(results.values())
    scope = "all eligible items" if args.all else f"sample of {len(items)} (seed {loader.seed})"
    print(f"{args.dataset}: {scope}, rules {RULE_SETS[ScreenRules(args.rules)][1]}")
    for v in Verdict:
        print(f"  {v.value:<10} {counts[v.value]:>5}")
    print(
        f"  paper: excluded {excluded_paper} of {n_paper} (kept {n_paper - excluded_paper}); "
        f"here: excluded {counts['exclude']} of {len(items)}, borderline {counts['borderline']}"
    )
    if args.show:
        for item_id, r in results.items():
            if r.verdict == args.show:
                print(f"  {item_id}: {'; '.join(r.reasons)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
