"""Image-set position-reference screen: does an item's text refer to images by their position?

Permuting the images of an item whose question or options say "the first image", "Image 2",
"which image ..." with image-index options, or "1-3-2" changes what the text means, so such items are not
valid under image_set_order. Two rule sets (`ScreenRules`, the loaders' `screen_rules` option):

- `reference` (default): the flags of the reference's released screen
  (`artifacts/screens/imageset_position_reference_screen.csv` of yahskapar/facet-probe names them; its
  regexes are not released, these are ours, written to its flag names and its summary's classification
  rules): `q_`/`c_image_ordinal`, `q_`/`c_image_number_ref`, `opt_image_index`, `digit_sequence_opt`,
  `q_order_sequence_q` exclude; `q_which_image` and `q_`/`c_spatial_abs` alone are borderline.
- `ours` (position-screen-v1): ordinal/number/letter/side + image noun, inline `<image>` placeholders,
  "respectively", reading-order phrases exclude; sequence and side words are borderline.

The reference's final verdicts add a human review (9 of its 270 items differ from what their flags say):
only its released verdict list carries that, and `screen_csv=<that CSV>` applies it (`read_verdicts`,
ids mapped by `reference_ids`). An optional judge (any callable) can settle borderline items. Loaders store
the verdict in `item.metadata["position_screen"]`; reports show screened results with raw beside them.

CLI (`datasets/screen_cli.py`, apart because it loads the loaders that import this module):
`python -m facet_probe.datasets.screen_cli --dataset mantis_eval --path <folder>` prints the counts on the real data (the paper's screen excluded 52 of 70 Mantis-Eval and 5 of 200 MedFrameQA items).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from facet_probe.datasets.reference_ids import to_item_id

RULES_VERSION = "position-screen-v1"
REFERENCE_RULES_VERSION = "position-screen-reference-v1"
CSV_VERSION = "reference-verdict-csv"
METADATA_KEY = "position_screen"


class ScreenRules(StrEnum):
    """Which rule set screens an item (see the module docstring)."""

    REFERENCE = "reference"  #: the reference's flags (default)
    OURS = "ours"  #: position-screen-v1


class Verdict(StrEnum):
    KEEP = "keep"
    BORDERLINE = "borderline"
    EXCLUDE = "exclude"


class Where(StrEnum):
    """Which text a rule reads: the question, the options, or both (flag `q_<name>` / `c_<name>`)."""

    QUESTION = "question"
    OPTIONS = "options"
    BOTH = "both"


@dataclass(frozen=True)
class Rule:
    name: str
    verdict: Verdict
    pattern: re.Pattern[str]
    description: str
    where: Where = Where.BOTH  # the reference's rules say where; ours read both


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

_LABEL = r"(?:\(?[A-Z]\)?[.:)]?\s+)?"  # an option's own "(A) " label
_INDEX = rf"(?:(?:the\s+)?{_ORD}\s+(?:one|{_NOUN})|{_NOUN}\s*(?:no\.?|number|#)?\s*(?:{_NUMWORD}|[A-F])|{_ORD}|\d+)"

#: The reference's flags (names from its released screen CSV; patterns ours, see the module docstring).
REFERENCE_RULES: tuple[Rule, ...] = (
    Rule("image_ordinal", Verdict.EXCLUDE, _rx(rf"\b{_ORD}\s+(?:\w+\s+)?{_NOUN}"),
         "an ordinal before an image noun: 'the first image', 'the last two frames'"),
    Rule("image_number_ref", Verdict.EXCLUDE,
         re.compile(rf"\b(?i:{_NOUN})\s*(?i:no\.?|number|#)?\s*(?:(?i:{_NUMWORD})\b|\(?[A-F]\)?(?=[\s,.;:?!)]|$))"),
         "an image noun with a number or letter: 'Image 2', 'picture #3', 'Image B'"),
    Rule("opt_image_index", Verdict.EXCLUDE, _rx(rf"^\s*{_LABEL}{_INDEX}\s*[.!]?\s*$"),
         "an option that is an image position: 'Image 1', '(A) the first image', 'second', '3'", Where.OPTIONS),
    Rule("digit_sequence_opt", Verdict.EXCLUDE,
         _rx(rf"^\s*{_LABEL}\(?\d+\)?(?:\s*(?:,|-|–|—|>|->|→|then|and)\s*\(?\d+\)?)+\s*[.!]?\s*$"),
         "an option that is a sequence of positions: '1, 3, 2', '2-1-3', '3 -> 1 -> 2'", Where.OPTIONS),
    Rule("q_order_sequence_q", Verdict.EXCLUDE,
         _rx(rf"\b(?:correct|right|proper|chronological|temporal|logical)\s+(?:order|sequence|ordering)\b"
             rf"|\bin\s+what\s+order\b|\b(?:order|sequence|ordering)\s+of\s+(?:the\s+|these\s+)?{_NOUN}"
             rf"|\b(?:arrange|rearrange|reorder|sort)\b"),
         "the question asks for an order of the images: 'the correct order', 'arrange the images'",
         Where.QUESTION),
    Rule("q_which_image", Verdict.BORDERLINE,
         _rx(rf"\bwhich\s+(?:one\s+)?(?:of\s+(?:the|these|those)\s+(?:\w+\s+)?)?{_NOUN}"),
         "the question asks to pick an image ('which image shows ...'); excluded with image-index options",
         Where.QUESTION),
    Rule("spatial_abs", Verdict.BORDERLINE,
         _rx(rf"\b{_SIDE}(?:\s+|-)(?:hand\s+)?(?:side\s+)?{_NOUN}|\b(?:on|at|in|to)\s+the\s+(?:far\s+)?{_SIDE}\b"),
         "absolute spatial words ('the left image', 'on the right'): load-bearing or within one image"),
)

#: Every flag the reference rules can raise (the released screen CSV's `regex_flags` vocabulary).
REFERENCE_FLAGS = frozenset(
    name for r in REFERENCE_RULES
    for name in ((f"q_{r.name}", f"c_{r.name}") if r.where is Where.BOTH else (r.name,))
)

RULE_SETS: dict[ScreenRules, tuple[tuple[Rule, ...], str]] = {
    ScreenRules.REFERENCE: (REFERENCE_RULES, REFERENCE_RULES_VERSION),
    ScreenRules.OURS: (RULES, RULES_VERSION),
}


@dataclass(frozen=True)
class ScreenResult:
    """The verdict with the rules that fired (and the text they matched), plus any judge decision."""

    verdict: Verdict
    reasons: tuple[str, ...] = ()
    judge: str | None = None
    rules: str = RULES_VERSION  # the rule set (or the verdict list) that decided

    def to_metadata(self) -> dict[str, object]:
        out: dict[str, object] = {
            "verdict": str(self.verdict),
            "reasons": list(self.reasons),
            "rules": self.rules,
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


_LABEL_LINE = re.compile(r"^[ \t]*(?:image|picture)[ \t]*\d+[ \t]*:[ \t]*<image>[ \t]*$", re.IGNORECASE | re.MULTILINE)


def _flag(rule: Rule, where: str, rules: ScreenRules) -> str:
    """The rule's name as the reference writes its flags: `q_`/`c_` for its rules that read both texts."""
    if rules is ScreenRules.REFERENCE and rule.where is Where.BOTH:
        return ("q_" if where == "question" else "c_") + rule.name
    return rule.name


def screen_text(question: str, options: Sequence[str] = (), judge: Judge | None = None,
                rules: ScreenRules | str = ScreenRules.REFERENCE) -> ScreenResult:
    """Classify a question and its options by a rule set; the judge (if any) settles borderline items."""
    rules = ScreenRules(rules)
    table, version = RULE_SETS[rules]
    text = question if rules is ScreenRules.OURS else _LABEL_LINE.sub("", question)  # slot labels name no content
    question_text = [("question", _strip_placeholder_blocks(text))]
    option_texts = [(f"option {chr(65 + i)}", str(o)) for i, o in enumerate(options)]
    reasons: list[str] = []
    verdict = Verdict.KEEP
    for rule in table:
        texts = {Where.QUESTION: question_text, Where.OPTIONS: option_texts}.get(rule.where, question_text + option_texts)
        fired: dict[str, str] = {}
        for where, body in texts:
            match = rule.pattern.search(body)
            if match:
                flag = _flag(rule, where, rules)
                fired.setdefault(flag, f"{flag} ({where}: {match.group(0).strip()!r})")
                if rules is ScreenRules.OURS:
                    break
        reasons += fired.values()
        if fired:
            verdict = max(verdict, rule.verdict, key=_severity)
    if verdict == Verdict.BORDERLINE and judge is not None:
        decided = judge(question, list(options))
        if decided is not None:
            decided = Verdict(str(decided))
            return ScreenResult(decided, tuple(reasons), judge=str(decided), rules=version)
    return ScreenResult(verdict, tuple(reasons), rules=version)


def _severity(v: Verdict) -> int:
    return {Verdict.KEEP: 0, Verdict.BORDERLINE: 1, Verdict.EXCLUDE: 2}[v]


def screen_item(item, judge: Judge | None = None, rules: ScreenRules | str = ScreenRules.REFERENCE) -> ScreenResult:
    """Screen an item's question (its raw upstream text when the loader kept it) and options (raw ones too)."""
    question = item.metadata.get("question_raw", item.question)
    return screen_text(question, item.metadata.get("options_raw", item.choices), judge, rules)


# --------------------------------------------------------------------------- the reference's verdict list
def read_verdicts(path: str | Path) -> dict[str, Verdict]:
    """{our item id: verdict} from a released per-item verdict list (columns `dataset`, `item_id` in the
    paper's artifact ids, `classification`), its ids mapped by `reference_ids.to_item_id`."""
    from facet_probe.core.errors import ConfigError

    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"screen_csv={path}: no such file; give the reference's "
                          "artifacts/screens/imageset_position_reference_screen.csv (or null for the rules)")
    with file.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    needed = {"dataset", "item_id", "classification"}
    if rows and not needed <= set(rows[0]):
        raise ConfigError(f"screen_csv={path}: needs the columns {sorted(needed)}, has {sorted(rows[0])}")
    out: dict[str, Verdict] = {}
    for line, row in enumerate(rows, 2):
        try:
            verdict = Verdict(row["classification"].strip())
        except ValueError:
            raise ConfigError(f"screen_csv={path}, line {line}: classification {row['classification']!r} is not "
                              f"one of {', '.join(v.value for v in Verdict)}") from None
        item_id = to_item_id(row["item_id"], "image_set_order", row["dataset"])
        if item_id is not None:
            out[item_id] = verdict
    return out


def with_verdicts(items: Sequence, verdicts: dict[str, Verdict], source: str) -> list:
    """Items whose stored screen verdict is the list's where the list has them (the rules' result is kept
    as `rules_verdict`); items the list lacks keep the rules' verdict, marked so."""
    out = []
    for item in items:
        stored = dict(item.metadata.get(METADATA_KEY) or {})
        own_id = item.metadata.get("stable_item_id", item.item_id)
        if own_id in verdicts:
            stored = {**stored, "rules_verdict": stored.get("verdict"), "verdict": str(verdicts[own_id]),
                      "rules": CSV_VERSION, "source": source}
        else:
            stored = {**stored, "source": "rules (not in the verdict list)"}
        out.append(item.model_copy(update={"metadata": {**item.metadata, METADATA_KEY: stored}}))
    return out


def screen_counts(results: Iterable[ScreenResult | Verdict]) -> Counter[str]:
    """How many items per verdict (keep / borderline / exclude all present, zero included)."""
    counts: Counter[str] = Counter({v.value: 0 for v in Verdict})
    for r in results:
        counts[str(r.verdict if isinstance(r, ScreenResult) else r)] += 1
    return counts


@dataclass(frozen=True)
class ScreenSettings:
    """An image-set loader's screen: the rule set its items are classified by, and an optional released
    verdict list (`screen_csv`) that overrides the rules for the items it lists."""

    rules: ScreenRules = ScreenRules.REFERENCE
    csv: str | None = None

    @classmethod
    def of(cls, dataset: str, rules: ScreenRules | str, csv_path: str | None) -> ScreenSettings:
        try:
            return cls(ScreenRules(str(rules)), csv_path)
        except ValueError:
            from facet_probe.core.errors import ConfigError

            raise ConfigError(f"dataset {dataset}: screen_rules={rules!r}; valid: "
                              f"{', '.join(r.value for r in ScreenRules)}") from None

    def apply(self, items: list) -> list:
        """The items with the verdict list's verdicts where it has them (unchanged without a list)."""
        return with_verdicts(items, read_verdicts(self.csv), str(self.csv)) if self.csv else items
