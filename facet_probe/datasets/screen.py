"""Image-set position-reference screen: does an item's text refer to images by their position?

Permuting the images of an item whose question or options say "the first image", "Image 2",
"the left picture" or "respectively" changes what the text means, so such items are not valid
under image_set_order. Each item is classified by documented regex rules:

- exclude: an explicit positional reference to an image (ordinal or number + image noun, a
  left/right/top/bottom image, an `<image>` placeholder inside the text (leading or trailing blocks
  of placeholders are fine),
  "respectively", "from left to right", "in the order shown", image letters like "Image A");
- borderline: wording that may or may not point at an image position (an ordinal or side word
  without an image noun, "former/latter", "previous/next", "sequence", "images above/below");
- keep: none of the above.

An optional judge (any callable) can settle borderline items. Loaders store the verdict in
`item.metadata["position_screen"]`; the app reports screened results by default, raw beside them.

CLI: `python -m facet_probe.datasets.screen --dataset mantis_eval --path <folder>` prints the counts
on the real data (the paper's screen excluded 52 of 70 Mantis-Eval and 5 of 200 MedFrameQA items).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from facet_probe.datasets.base import DatasetUnavailable

RULES_VERSION = "position-screen-v1"
METADATA_KEY = "position_screen"


class Verdict(StrEnum):
    KEEP = "keep"
    BORDERLINE = "borderline"
    EXCLUDE = "exclude"


@dataclass(frozen=True)
class Rule:
    name: str
    verdict: Verdict
    pattern: re.Pattern[str]
    description: str


_NOUN = (
    r"(?:(?:images?|pictures?|pics?|photos?|photographs?|frames?|figures?|figs?|panels?|scans?|slides?|"
    r"views?|imgs?)\b\.?)"
)
_ORD = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|final|penultimate|middle|"
    r"1st|2nd|3rd|[4-9]th|10th)"
)
_NUMWORD = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_SIDE = r"(?:left|right|top|bottom|upper|lower|leftmost|rightmost|topmost|bottommost)"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


RULES: tuple[Rule, ...] = (
    Rule(
        "ordinal_image",
        Verdict.EXCLUDE,
        _rx(rf"\b{_ORD}\s+(?:\w+\s+)?{_NOUN}"),
        "an ordinal before an image noun: 'the first image', 'the last two photos', 'second frame'",
    ),
    Rule(
        "numbered_image",
        Verdict.EXCLUDE,
        _rx(rf"\b{_NOUN}\s*(?:no\.?|number|#)?\s*{_NUMWORD}\b"),
        "an image noun with a number: 'Image 2', 'picture #3', 'frame three', 'Fig. 1'",
    ),
    Rule(
        "lettered_image",
        Verdict.EXCLUDE,
        re.compile(rf"\b(?i:{_NOUN})\s*\(?[A-F]\)?(?=[\s,.;:?!)]|$)"),
        "an image noun with a letter label: 'Image A', 'panel (B)'",
    ),
    Rule(
        "side_image",
        Verdict.EXCLUDE,
        _rx(rf"\b{_SIDE}(?:\s+|-)(?:hand\s+)?(?:side\s+)?{_NOUN}"),
        "a side before an image noun: 'the left image', 'top picture', 'right-hand photo'",
    ),
    Rule(
        "inline_placeholder",
        Verdict.EXCLUDE,
        _rx(r"\S[^\S\n]*<image>|<image>[^\S\n]*[^\s<]"),
        "an <image> placeholder bound to text (not a leading block of placeholders)",
    ),
    Rule(
        "respectively",
        Verdict.EXCLUDE,
        _rx(r"\brespectively\b"),
        "'respectively' binds a list to the images' order",
    ),
    Rule(
        "reading_order",
        Verdict.EXCLUDE,
        _rx(
            r"\bfrom\s+(?:left\s+to\s+right|right\s+to\s+left|top\s+to\s+bottom|bottom\s+to\s+top)\b"
            r"|\bin\s+(?:the\s+)?(?:order|sequence)\s+"
            r"(?:shown|given|presented|displayed|provided|above|below)\b"
            r"|\b(?:shown|given|presented|displayed)\s+in\s+order\b"
        ),
        "reading order across the images: 'from left to right', 'in the order shown'",
    ),
    Rule(
        "ordinal_one",
        Verdict.BORDERLINE,
        _rx(rf"\b(?:the\s+)?{_ORD}\s+(?:one|ones|pair)\b"),
        "an ordinal with 'one': 'the first one', 'the last one'",
    ),
    Rule(
        "side_word",
        Verdict.BORDERLINE,
        _rx(rf"\b(?:on|to|at|in)\s+the\s+{_SIDE}\b|\b{_SIDE}\s+(?:one|side)\b"),
        "a side without an image noun: 'on the left', 'the right one' (may be within one image)",
    ),
    Rule(
        "former_latter",
        Verdict.BORDERLINE,
        _rx(r"\b(?:former|latter)\b"),
        "'former' / 'latter' refer to an order of mention",
    ),
    Rule(
        "previous_next",
        Verdict.BORDERLINE,
        _rx(rf"\b(?:previous|preceding|next|following|subsequent)\s+{_NOUN}|\b{_NOUN}\s+(?:above|below)\b"),
        "'the next image', 'the images above' may point at a position",
    ),
    Rule(
        "sequence_words",
        Verdict.BORDERLINE,
        _rx(
            r"\b(?:sequence|sequential|series\s+of|progression|timeline|chronolog\w*|in\s+order(?!\s+to\b))\b"
        ),
        "sequence wording: the images' order may carry meaning",
    ),
)


@dataclass(frozen=True)
class ScreenResult:
    """The verdict with the rules that fired (and the text they matched), plus any judge decision."""

    verdict: Verdict
    reasons: tuple[str, ...] = ()
    judge: str | None = None

    def to_metadata(self) -> dict[str, object]:
        out: dict[str, object] = {
            "verdict": str(self.verdict),
            "reasons": list(self.reasons),
            "rules": RULES_VERSION,
        }
        if self.judge is not None:
            out["judge"] = self.judge
        return out


#: A judge sees the question and options and returns a verdict for a borderline item (None: no opinion).
Judge = Callable[[str, Sequence[str]], "Verdict | str | None"]


def _strip_placeholder_blocks(text: str) -> str:
    """Drop leading and trailing blocks of `<image>` placeholders (images listed before or after the
    text are not bound to any words; placeholders inside the text are)."""
    return re.sub(r"(?:\s*<image>)+\s*$", "", re.sub(r"^(?:\s*<image>)+\s*", "", text))


def screen_text(question: str, options: Sequence[str] = (), judge: Judge | None = None) -> ScreenResult:
    """Classify a question and its options by the rules; the judge (if any) settles borderline items."""
    texts = [("question", _strip_placeholder_blocks(question))]
    texts += [(f"option {chr(65 + i)}", str(o)) for i, o in enumerate(options)]
    reasons: list[str] = []
    verdict = Verdict.KEEP
    for rule in RULES:
        for where, text in texts:
            match = rule.pattern.search(text)
            if match:
                reasons.append(f"{rule.name} ({where}: {match.group(0).strip()!r})")
                verdict = max(verdict, rule.verdict, key=_severity)
                break
    if verdict == Verdict.BORDERLINE and judge is not None:
        decided = judge(question, list(options))
        if decided is not None:
            decided = Verdict(str(decided))
            return ScreenResult(decided, tuple(reasons), judge=str(decided))
    return ScreenResult(verdict, tuple(reasons))


def _severity(v: Verdict) -> int:
    return {Verdict.KEEP: 0, Verdict.BORDERLINE: 1, Verdict.EXCLUDE: 2}[v]


def screen_item(item, judge: Judge | None = None) -> ScreenResult:
    """Screen an item's question (its raw upstream text when the loader kept it) and choices."""
    question = item.metadata.get("question_raw", item.question)
    return screen_text(question, item.choices, judge)


def verdict_of(item) -> Verdict | None:
    """The verdict a loader stored on the item, if any."""
    stored = item.metadata.get(METADATA_KEY)
    return Verdict(stored["verdict"]) if stored else None


def screen_counts(results: Iterable[ScreenResult | Verdict]) -> Counter[str]:
    """How many items per verdict (keep / borderline / exclude all present, zero included)."""
    counts: Counter[str] = Counter({v.value: 0 for v in Verdict})
    for r in results:
        counts[str(r.verdict if isinstance(r, ScreenResult) else r)] += 1
    return counts


# --------------------------------------------------------------------------- CLI
PAPER_COUNTS = {"mantis_eval": (52, 70), "medframeqa": (5, 200)}


def _loader(dataset: str, path: str | None, n: int | None):
    if dataset == "mantis_eval":
        from facet_probe.datasets.mantis_eval import MantisEval

        return MantisEval(name=dataset, path=path, n=n)
    if dataset == "medframeqa":
        from facet_probe.datasets.medframeqa import MedFrameQA

        return MedFrameQA(name=dataset, path=path, n=n)
    raise SystemExit(f"unknown dataset {dataset!r}: the screen applies to {sorted(PAPER_COUNTS)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m facet_probe.datasets.screen", description=__doc__.split("\n")[0]
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
    args = parser.parse_args(argv)
    excluded_paper, n_paper = PAPER_COUNTS[args.dataset]
    loader = _loader(args.dataset, args.path, args.n or n_paper)
    try:
        items = loader.load_all() if args.all else loader.load()
    except DatasetUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    results = {it.item_id: screen_item(it) for it in items}
    counts = screen_counts(results.values())
    scope = "all eligible items" if args.all else f"sample of {len(items)} (seed {loader.seed})"
    print(f"{args.dataset}: {scope}, rules {RULES_VERSION}")
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
