"""Reading stored trials: run folders, trial JSONL files (ours or FACET-PROBE v0.0.1), shards.

Readers tolerate a torn last line (a crash mid-write) and de-duplicate by trial key, keeping the
latest successful record, so merged shards and resumed runs never double-count.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)

TRIALS_FILE = "trials.jsonl"


def trial_files(inputs: str | Path | Iterable[str | Path]) -> list[Path]:
    """Expand run folders (all `trials*.jsonl` inside, shards included) and files into a file list."""
    if isinstance(inputs, str | Path):
        inputs = [inputs]
    files: list[Path] = []
    for raw in inputs:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(path.glob("trials*.jsonl")) + sorted(path.glob("shards/*.jsonl"))
            if not found:
                raise FileNotFoundError(f"{path}: no trials*.jsonl in this folder (is it a run folder?)")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such run folder or trials file")
    return files


def iter_records(path: Path) -> Iterator[dict]:
    """Records of one JSONL file; a torn (unterminated, unparseable) last line is skipped with a warning."""
    with path.open("rb") as fh:
        lines = fh.read().split(b"\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if lineno >= len(lines) - 1:
                log.warning("%s: ignoring a torn last line (a run was interrupted mid-write)", path)
                continue
            raise ValueError(f"{path}:{lineno}: malformed trial line (not JSON); fix or remove it") from None


def load_trial_frame(inputs: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """All trials from the inputs as one DataFrame, one row per trial (errors and duplicates removed).

    Files from the FACET-PROBE reference (no `trial_key`, no `repeat_idx`) get keys derived from
    (model, facet, dataset, item_id, ordering_idx) and repeat 0.
    """
    records = [rec for f in trial_files(inputs) for rec in iter_records(f)]
    if not records:
        raise ValueError(f"no trials found in {inputs}")
    frame = pd.DataFrame.from_records(records)
    if "repeat_idx" not in frame:
        frame["repeat_idx"] = 0
    if "trial_key" not in frame:
        frame["trial_key"] = (frame["model"].astype(str) + "|" + frame["facet"].astype(str) + "|"
                              + frame["dataset"].astype(str) + "|" + frame["item_id"].astype(str) + "|"
                              + frame["ordering_idx"].astype(str) + "|" + frame["repeat_idx"].astype(str))
    if "error" in frame:
        frame = frame[frame["error"].isna()]
    if "parse_status" not in frame:
        frame["parse_status"] = frame["answer_normalized"].map(
            lambda a: "parse_error" if a in (None, "", "<parse_error>") else "ok")
    return frame.drop_duplicates("trial_key", keep="last").reset_index(drop=True)
