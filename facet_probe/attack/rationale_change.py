"""How an attack changed the rationale (the paper's Table 2 and Figure 7), and the labels a person can fix.

- `changed(row)`: the mechanical test: the rationale differs after normalisation (whitespace, case).
- `heuristic_label(row)`: the transparent baseline labeller of Figure 7: ``no_change`` when the rationale
  is the same after normalisation, ``key`` when the changed words (a word-level diff of the two
  rationales) hold a content word of the answer (the option text of the clean or of the adversarial
  answer, stop words left out), else ``trivial``.
- `rationale_labels.csv` (`write_labels` / `read_labels`): one row per attacked sample with CoT, with the
  heuristic label, the LLM judge's label (when a judge ran) and a `label` column a person may fill in.
  The figure reads `label` when set, else the judge's, else the heuristic's; rebuilding keeps what a
  person wrote.
"""

from __future__ import annotations

import csv
import difflib
import re
from enum import StrEnum
from pathlib import Path

from facet_probe.attack.criteria import normalise_rationale
from facet_probe.store.csv_tables import write_rows


class Change(StrEnum):
    """A rationale change as the paper's Figure 7 labels it."""

    KEY = "key"  # words crucial to the answer changed
    TRIVIAL = "trivial"  # other words changed
    NO_CHANGE = "no_change"


LABELS_FILE = "rationale_labels.csv"
LABEL_COLUMNS = ("attack", "sample_id", "item_id", "outcome", "clean_answer", "adv_answer", "clean_rationale",
                 "adv_rationale", "changed_words", "heuristic", "llm", "llm_judge", "label", "used", "used_from")

_STOP_WORDS = (
    "a an the of to in on at by for with and or but is are was were be been it its this that these those there "
    "as from so because therefore thus which what who whom image picture photo shows show shown answer option "
    "options correct question i we you they he she them his her their our not no yes")
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def changed(row: dict) -> bool:
    """The rationale differs after normalisation (whitespace, case): Table 2's mechanical column."""
    return normalise_rationale(row.get("clean_rationale") or "") != normalise_rationale(row.get("adv_rationale") or "")


def changed_words(clean: str, adv: str) -> list[str]:
    """The words a word-level diff replaces, deletes or inserts between the two rationales."""
    a, b = words(clean), words(adv)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out += a[i1:i2] + b[j1:j2]
    return out


def answer_words(row: dict) -> set[str]:
    """Content words of the option texts of the clean and the adversarial answer."""
    labels, options = list(row.get("labels") or []), list(row.get("options") or [])
    texts = [options[labels.index(x)] for x in (row.get("clean_answer"), row.get("adv_answer"))
             if x in labels and labels.index(x) < len(options)]
    return {w for t in texts for w in words(t) if w not in _STOP}


def heuristic_label(row: dict) -> Change:
    """key / trivial / no_change for one attacked row (see the module docstring)."""
    if not changed(row):
        return Change.NO_CHANGE
    diff = set(changed_words(row.get("clean_rationale") or "", row.get("adv_rationale") or ""))
    return Change.KEY if diff & answer_words(row) else Change.TRIVIAL


def read_labels(path: Path) -> dict[tuple[str, str], dict]:
    """(attack, sample_id) -> row of an existing labels file (none: empty)."""
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as fh:
        return {(r["attack"], r["sample_id"]): r for r in csv.DictReader(fh)}


def label_rows(attacked: dict[str, list[dict]], judged: dict[tuple[str, str], tuple[str, str]],
               before: dict[tuple[str, str], dict]) -> list[dict]:
    """The labels table: attack -> its attacked rows with CoT; `judged`: (attack, sample_id) -> (judge,
    label); `before`: the previous file, whose hand-written `label`s are kept."""
    out = []
    for attack, rows in attacked.items():
        for r in rows:
            key = (attack, r["sample_id"])
            hand = (before.get(key, {}).get("label") or "").strip()
            if hand and hand not in set(Change):
                raise ValueError(f"{LABELS_FILE}: label {hand!r} for {key} is not one of "
                                 f"{', '.join(c.value for c in Change)}")
            judge, llm = judged.get(key, ("", ""))
            heur = heuristic_label(r).value
            used, source = (hand, "hand") if hand else (llm, "llm") if llm else (heur, "heuristic")
            out.append({"attack": attack, "sample_id": r["sample_id"], "item_id": r.get("item_id", ""),
                        "outcome": "success" if r.get("success") else "failure",
                        "clean_answer": r.get("clean_answer"), "adv_answer": r.get("adv_answer"),
                        "clean_rationale": r.get("clean_rationale") or "", "adv_rationale": r.get("adv_rationale") or "",
                        "changed_words": " ".join(changed_words(r.get("clean_rationale") or "",
                                                                r.get("adv_rationale") or "")),
                        "heuristic": heur, "llm": llm, "llm_judge": judge, "label": hand, "used": used,
                        "used_from": source})
    return out


def write_labels(path: Path, rows: list[dict]) -> None:
    write_rows(path, rows, LABEL_COLUMNS)


def figure7_counts(rows: list[dict]) -> dict[tuple[str, str], dict[str, int]]:
    """(attack, outcome) -> count per used label, from the labels table."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        cell = out.setdefault((r["attack"], r["outcome"]), {c.value: 0 for c in Change})
        cell[r["used"]] += 1
    return out
