"""An attack run folder (see `facet_probe.attack.outputs`) for the explorer: per sample, the clean and
adversarial images and replies, and a word diff of the two rationales."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from facet_probe.store.jsonl import iter_records

RESULTS = "results.jsonl"  # attack.outputs.RESULTS; read here without importing the attack's torch code
_SIDES = ("output", "answer", "rationale", "correct", "parse_status", "answer_first")
_KEEP = ("sample_id", "item_id", "dataset", "model", "attack", "mode", "labels", "gold", "target", "selected",
         "selection_reason", "attacked", "success", "rationale_changed", "hit_target", "linf_255", "steps_run",
         "prompt_hash", "error")


def is_attack_run(folder: Path) -> bool:
    return (folder / RESULTS).is_file() and (folder / "attack_settings.json").is_file()


def word_diff(before: str | None, after: str | None) -> list[list[str]]:
    """[op, text] runs turning `before` into `after` word by word: '=' kept, '-' removed, '+' added."""
    a, b = (before or "").split(), (after or "").split()
    ops: list[list[str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            ops.append(["=", " ".join(a[i1:i2])])
            continue
        if i2 > i1:
            ops.append(["-", " ".join(a[i1:i2])])
        if j2 > j1:
            ops.append(["+", " ".join(b[j1:j2])])
    return ops


def attack_rows(folder: Path, page_dir: Path) -> list[dict]:
    """The page's rows of an attack run: one per sample, image paths relative to the page."""
    rows = []
    rel = Path(os.path.relpath(folder.resolve(), page_dir.resolve()))
    for rec in iter_records(folder / RESULTS):
        row: dict[str, Any] = {k: rec.get(k) for k in _KEEP}
        for side in ("clean", "adv"):
            row[side] = {k: rec.get(f"{side}_{k}") for k in _SIDES}
            row[side]["images"] = [(rel / p).as_posix() for p in ((rec.get("images") or {}).get(side) or [])]
        row["rationale_diff"] = word_diff(rec.get("clean_rationale"), rec.get("adv_rationale")) \
            if rec.get("attacked") else []
        rows.append(row)
    return rows
